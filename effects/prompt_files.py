"""Reads what the system prompt is assembled from, and subdirectory hint files.

``ContextReader.read_inputs`` gathers, once a session: the identity (``SOUL.md`` in the home),
the project context files from the repository root down to the working directory (priority in
``stages.prompt.context_files``), the skills' cards, and the built-in memory's snapshot. The result
is
an observation (``PromptInputsRead``): a replay serves it from the log and never reads a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import attrs

from effects.memory_store import MemoryStore
from effects.skill_files import scan_skills, skill_roots
from stages.log.events import HintsRead, PromptInputsRead
from stages.prompt.context_files import (
    CONTEXT_NAMES,
    CURSOR_RULES,
    CURSOR_RULES_DIR,
    HINT_NAMES,
    truncate,
)

RAW_MAX_CHARS = 200_000  # what a file may put in the log; the prompt caps far lower
MAX_PARENT_DIRS = 12


def read_text(path: Path) -> str | None:
    """A file's text (a leading BOM dropped, bad bytes replaced), capped for the log; None
    when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except (OSError, ValueError):
        return None
    return truncate(text, RAW_MAX_CHARS, path.name)


def _is_dir(path: Path) -> bool:
    """A path the model wrote may be anything (a NUL byte, a name too long): not a directory."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def repository_root(cwd: Path) -> Path | None:
    for directory in (cwd, *cwd.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _directories(cwd: Path) -> list[Path]:
    """From the repository root (or the working directory outside one) down to ``cwd``."""
    root = repository_root(cwd)
    chain = [cwd]
    if root is not None:
        for parent in cwd.parents:
            if len(chain) >= MAX_PARENT_DIRS or parent == root.parent:
                break
            chain.append(parent)
            if parent == root:
                break
    return chain[::-1]


def _first_kind(directory: Path) -> list[Path]:
    for name in CONTEXT_NAMES:
        if (directory / name).is_file():
            return [directory / name]
    found = [directory / CURSOR_RULES] if (directory / CURSOR_RULES).is_file() else []
    rules = directory / CURSOR_RULES_DIR
    if rules.is_dir():
        found += sorted(p for p in rules.glob("*.mdc") if p.is_file())
    return found


def context_files(cwd: Path) -> tuple[tuple[str, str], ...]:
    """(name, text) of the context files that apply in ``cwd``, general to specific."""
    chain = _directories(cwd)
    base = chain[0]
    out: list[tuple[str, str]] = []
    for directory in chain:
        for path in _first_kind(directory):
            text = read_text(path)
            if text is not None and text.strip():
                out.append((path.relative_to(base).as_posix(), text))
    return tuple(out)


class ContextSource(Protocol):
    def read_inputs(self) -> PromptInputsRead: ...

    def read_hints(self, dirs: tuple[str, ...], cwd: str) -> HintsRead: ...


@attrs.define
class ContextReader:
    """The live reader. ``load_*`` switch parts off (the session still records what it
    read, which is then nothing)."""

    home: Path
    cwd: Path = attrs.field(factory=Path.cwd)
    load_memory: bool = True
    load_skills: bool = True

    @property
    def working_dir(self) -> Path:
        return self.cwd.expanduser().resolve()

    def read_inputs(self) -> PromptInputsRead:
        cwd = self.working_dir
        soul = self.home / "SOUL.md"
        return PromptInputsRead(
            cwd=cwd.as_posix(),
            identity=read_text(soul) if soul.is_file() else None,
            context_files=context_files(cwd),
            memory=MemoryStore(self.home).snapshot() if self.load_memory else (),
            skills=scan_skills(skill_roots(self.home, cwd)) if self.load_skills else ())

    def read_hints(self, dirs: tuple[str, ...], cwd: str) -> HintsRead:
        """The first hint file of each directory; names relative to the session's working
        directory ``cwd`` (as recorded when the session started)."""
        files: list[tuple[str, str]] = []
        for name in dirs:
            directory = Path(name)
            if not _is_dir(directory):
                continue
            for candidate in HINT_NAMES:
                path = directory / candidate
                if path.is_file():
                    text = read_text(path)
                    if text is not None and text.strip():
                        files.append((path.relative_to(cwd).as_posix(), text))
                    break
        return HintsRead(dirs=dirs, files=tuple(files))
