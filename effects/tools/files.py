"""The file tools: ``read_file``, ``write_file``, ``patch`` and ``search_files``.

Each is a method of :class:`FileTools`, bound to one :class:`Workspace`; the schemas the model
sees come from the signatures and docstrings (``pipeline.toolsets`` makes Tools of them).
Every failure is a :class:`ToolError` whose message tells the model what to do instead.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

import attrs

from effects.tools.workspace import ToolError, Workspace

__all__ = ["MAX_LINE_CHARS", "MAX_READ_LINES", "FileTools"]

MAX_READ_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_SEARCH_FILE_BYTES = 2_000_000
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv",
                           ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"})


def _read_text(path: Path, shown: str) -> str:
    if not path.exists():
        raise ToolError(f"file not found: {shown}")
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; use search_files to list it")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError(f"{shown} is a binary file ({len(data)} bytes); it cannot be shown")
    return data.decode("utf-8", errors="replace")


@attrs.frozen
class FileTools:
    workspace: Workspace

    def read_file(self, path: str, offset: int = 1, limit: int = 500) -> str:
        """Read a text file; each line is shown as "NUMBER|TEXT".

        Args:
            path: The file, relative to the working directory (or absolute inside it).
            offset: The first line to show (1-based).
            limit: The most lines to show (at most 2000).
        """
        if offset < 1 or limit < 1:
            raise ToolError("offset and limit must be at least 1")
        target = self.workspace.resolve(path)
        lines = _read_text(target, path).splitlines()
        if offset > max(len(lines), 1):
            raise ToolError(f"{path} has {len(lines)} lines; offset {offset} is past its end")
        shown = lines[offset - 1:offset - 1 + min(limit, MAX_READ_LINES)]
        text = "\n".join(f"{offset + i}|{line[:MAX_LINE_CHARS]}" for i, line in enumerate(shown))
        last = offset - 1 + len(shown)
        if last < len(lines):
            text += f"\n[lines {offset}-{last} of {len(lines)}; read on with offset={last + 1}]"
        return text

    def write_file(self, path: str, content: str) -> dict[str, object]:
        """Write a text file, replacing it if it exists; missing directories are created.

        Args:
            path: The file, relative to the working directory.
            content: The whole new content of the file.
        """
        target = self.workspace.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path} is a directory; give a file path")
        target.parent.mkdir(parents=True, exist_ok=True)
        existed = target.exists()
        target.write_text(content, encoding="utf-8")
        return {"path": self.workspace.shown(target), "bytes_written": len(content.encode()),
                "created": not existed}

    def patch(self, path: str, old_string: str, new_string: str,
              replace_all: bool = False) -> dict[str, object]:
        """Edit a file by replacing an exact piece of text with another.

        Args:
            path: The file to edit, relative to the working directory.
            old_string: The exact text to replace, with enough context to occur only once.
            new_string: The text to put in its place.
            replace_all: Replace every occurrence instead of requiring exactly one.
        """
        if not old_string:
            raise ToolError("old_string is empty; give the exact text to replace")
        target = self.workspace.resolve(path)
        text = _read_text(target, path)
        count = text.count(old_string)
        if count == 0:
            raise ToolError(f"old_string was not found in {path}; read the file and copy the "
                            "text exactly, including whitespace")
        if count > 1 and not replace_all:
            raise ToolError(f"old_string occurs {count} times in {path}; add surrounding lines "
                            "so it occurs once, or set replace_all")
        updated = text.replace(old_string, new_string, -1 if replace_all else 1)
        target.write_text(updated, encoding="utf-8")
        return {"path": self.workspace.shown(target), "replacements": count if replace_all else 1}

    def search_files(self, pattern: str, target: str = "content", path: str = ".",
                     file_glob: str | None = None, limit: int = 50) -> dict[str, object]:
        """Search the working tree: file names by glob, or file contents by regular expression.

        Args:
            pattern: A glob for file names (target "files", e.g. "*.py") or a regular expression
                for contents (target "content").
            target: "content" to search inside files, "files" to find files by name.
            path: The directory to search, relative to the working directory.
            file_glob: With target "content", only search files whose name matches this glob.
            limit: The most matches to return.
        """
        root = self.workspace.resolve(path)
        if not root.is_dir():
            raise ToolError(f"{path} is not a directory")
        if target == "files":
            shown = (self.workspace.shown(p) for p in _walk(root))
            found = [s for s in shown if fnmatch.fnmatch(Path(s).name, pattern)
                     or fnmatch.fnmatch(s, pattern)]
            return {"files": found[:limit], "total": len(found)}
        if target != "content":
            raise ToolError(f"target must be 'content' or 'files', got {target!r}")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"pattern is not a valid regular expression: {exc}") from None
        matches = list(self._grep(root, regex, file_glob, limit + 1))
        return {"matches": matches[:limit], "truncated": len(matches) > limit}

    def _grep(self, root: Path, regex: re.Pattern[str], file_glob: str | None,
              limit: int) -> Iterator[dict[str, object]]:
        found = 0
        for file in _walk(root):
            if file_glob and not fnmatch.fnmatch(file.name, file_glob):
                continue
            try:  # a dangling symlink, an unreadable file: not a match, not a failure
                if file.stat().st_size > MAX_SEARCH_FILE_BYTES:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if regex.search(line):
                    yield {"path": self.workspace.shown(file), "line": number,
                           "text": line[:MAX_LINE_CHARS]}
                    found += 1
                    if found >= limit:
                        return


def _walk(root: Path) -> Iterator[Path]:
    """Files under ``root`` in a stable order, skipping version-control and cache directories."""
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            yield Path(directory) / name
