"""What the built-in tools share: the working tree they may touch, and their error.

A :class:`Workspace` resolves the model's paths against the working directory and refuses
those outside it (and outside any extra allowed root) unless ``allow_outside`` is set: a model
that was asked to fix a bug in a project has no business writing to ``~/.ssh``.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from stages.errors import MibyanError

__all__ = ["ToolError", "Workspace", "cap_middle"]


class ToolError(MibyanError):
    """A built-in tool cannot do what the model asked; the message says why and what to do."""


def _resolved(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


@attrs.frozen(kw_only=True)
class Workspace:
    """The working tree (``root``), extra roots the tools may also reach (``allowed``), and
    whether any path at all is allowed."""

    root: Path = attrs.field(converter=_resolved)
    allowed: tuple[Path, ...] = attrs.field(default=(), converter=lambda ps: tuple(
        _resolved(p) for p in ps))
    allow_outside: bool = False

    def resolve(self, path: str) -> Path:
        """``path`` (absolute, ``~``, or relative to the root) as an absolute path, symlinks
        followed, or a ToolError when it leaves the working tree."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path is empty; give a file path relative to the working directory")
        target = Path(path).expanduser()
        if not target.is_absolute():
            target = self.root / target
        resolved = _resolved(target)
        if self.allow_outside or self.contains(resolved):
            return resolved
        raise ToolError(f"path {path!r} is outside the working directory {self.root}; "
                        "only files under it may be used")

    def contains(self, path: Path) -> bool:
        return any(path == root or root in path.parents for root in (self.root, *self.allowed))

    def shown(self, path: Path) -> str:
        """The path as the model should name it: relative to the root when under it."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def cap_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and its tail (a command's
    error is usually at the end), with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n\n[... {left_out} characters left out ...]\n\n{text[-tail:]}"
