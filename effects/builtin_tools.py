"""The small built-in toolset the CLI offers: read-only looks at the local file system."""

from __future__ import annotations

import os
from pathlib import Path

MAX_READ_CHARS = 100_000


def read_file(path: str, offset: int = 0, limit: int = 400) -> str:
    """Read a UTF-8 text file and return its lines with line numbers.

    Args:
        path: The file to read, absolute or relative to the working directory.
        offset: The first line to return (0-based).
        limit: The most lines to return.
    """
    lines = Path(path).expanduser().read_text(encoding="utf-8", errors="replace").splitlines()
    shown = lines[max(0, offset):max(0, offset) + max(1, limit)]
    text = "\n".join(f"{offset + i + 1:>6}  {line}" for i, line in enumerate(shown))
    return text[:MAX_READ_CHARS]


def list_directory(path: str = ".") -> list[str]:
    """List the entries of a directory; directories end with a slash.

    Args:
        path: The directory to list.
    """
    with os.scandir(Path(path).expanduser()) as entries:
        return sorted(e.name + ("/" if e.is_dir() else "") for e in entries)
