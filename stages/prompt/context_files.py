"""Project context files: which names count, in what priority, how they are capped, and how
they read in the prompt. The files are read by an effect (``effects.prompt_files``); this
module only decides from what was read.

Priority, per directory from the repository root down to the working directory (so the nearest,
most specific file comes last): the first present of ``MIBYAN.md``/``.mibyan.md``, ``AGENTS.md``
(or ``agents.md``), ``CLAUDE.md`` (or ``claude.md``), then ``.cursorrules`` together with
``.cursor/rules/*.mdc``. One kind per directory: projects often keep the same rules under
several names, and loading them all would say everything twice.
"""

from __future__ import annotations

import posixpath
import shlex

from stages.prompt.injection_wide import screened
from stages.prompt.memory import sanitize
from stages.prompt.skills import split_frontmatter

CONTEXT_NAMES = ("MIBYAN.md", ".mibyan.md", "AGENTS.md", "agents.md", "CLAUDE.md", "claude.md")
CURSOR_RULES = ".cursorrules"
CURSOR_RULES_DIR = ".cursor/rules"
HINT_NAMES = ("AGENTS.md", "agents.md", "CLAUDE.md", "claude.md", ".cursorrules")

CONTEXT_FILE_MAX_CHARS = 20_000
HINT_MAX_CHARS = 8_000
IDENTITY_MAX_CHARS = 20_000
HEAD_SHARE, TAIL_SHARE = 7, 2  # of nine parts: 70% head, 20% tail, the rest is the marker


def truncate(text: str, cap: int, name: str) -> str:
    """``text`` if it fits ``cap`` characters; else its head and tail around a marker that says
    what was cut, the whole within ``cap``."""
    if len(text) <= cap:
        return text
    marker = (f"\n\n[... {name} truncated: {len(text)} chars, the middle was left out; "
              "read the file itself for the rest ...]\n\n")
    budget = cap - len(marker)
    if budget <= 0:
        return text[:cap]
    head = budget * HEAD_SHARE // (HEAD_SHARE + TAIL_SHARE)
    tail = budget * TAIL_SHARE // (HEAD_SHARE + TAIL_SHARE)
    return text[:head] + marker + (text[-tail:] if tail else "")


def strip_frontmatter(text: str) -> str:
    """A leading YAML frontmatter block (``---`` ... ``---``) is metadata, not instructions."""
    # Unlike a skill's, a context file opening with a BOM keeps its block: recorded sessions'
    # prompts were built so, and replay rebuilds them.
    parts = None if text.startswith("\ufeff") else split_frontmatter(text)
    return text if parts is None else parts[1].lstrip("\n")


def context_section(files: tuple[tuple[str, str], ...], *, cap: int = CONTEXT_FILE_MAX_CHARS,
                    wide: bool = False) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The ``# Project Context`` section for the prompt, and the notices (name, detail) for the
    files that were blocked or truncated."""
    sections: list[str] = []
    notices: list[tuple[str, str]] = []
    for name, raw in files:
        text = sanitize(strip_frontmatter(raw)).strip()
        if not text:
            continue
        # Only what reaches the prompt is scanned: a cut middle is never read.
        size = len(text)
        text, findings = screened(name, truncate(text, cap, name), wide=wide)
        if findings:
            notices.append((name, "blocked: " + ", ".join(findings)))
        elif size > cap:
            notices.append((name, f"truncated: {size} chars, cap {cap}"))
        sections.append(f"## {name}\n\n{text}")
    if not sections:
        return None, tuple(notices)
    return "# Project Context\n\n" + "\n\n".join(sections), tuple(notices)


# --- subdirectory hints ------------------------------------------------------------------------

PATH_KEYS = ("path", "file_path", "filepath", "filename", "workdir", "cwd", "dir", "directory",
             "target", "source", "destination")
COMMAND_KEYS = ("command", "cmd", "script")
MAX_ANCESTORS = 5
MAX_HINT_DIRS = 16


def _command_tokens(command: str) -> list[str]:
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:
        tokens = command.split()
    return [t for t in tokens if ("/" in t or "." in t) and not t.startswith("-")
            and "://" not in t and "=" not in t]


def candidate_paths(arguments: dict) -> list[str]:
    """The path-like values among a tool call's arguments: path arguments, and the tokens of a
    shell command that look like paths (flags and URLs skipped)."""
    found: list[str] = []
    for key in PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            found.append(value.strip())
        elif isinstance(value, list):
            found.extend(v.strip() for v in value if isinstance(v, str) and v.strip())
    for key in COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            found.extend(_command_tokens(value))
    return found


def reached_dirs(paths: list[str], cwd: str, seen: frozenset[str]) -> list[str]:
    """The directories inside ``cwd`` that ``paths`` reach and that were never checked: each
    path and up to five of its ancestors, stopping at ``cwd`` or at a checked directory. A file
    path names itself too; the reader finds no directory there and moves on."""
    out: list[str] = []
    for path in paths:
        if path.startswith("~"):
            continue
        current = posixpath.normpath(posixpath.join(cwd, path))
        for _ in range(MAX_ANCESTORS + 1):
            if current == cwd or not current.startswith(cwd.rstrip("/") + "/"):
                break
            if current in seen or current in out:
                break
            out.append(current)
            current = posixpath.dirname(current)
    return out


def hint_text(name: str, raw: str, *, wide: bool = False) -> tuple[str, tuple[str, ...]]:
    """A subdirectory's context file as it is appended to a tool result, and its findings."""
    text = truncate(sanitize(strip_frontmatter(raw)).strip(), HINT_MAX_CHARS, name)
    text, findings = screened(name, text, wide=wide)
    return f"[Subdirectory context discovered: {name}]\n{text}", findings
