"""``.env`` files, as people bring them from other tools: the working directory's, then the
home's (``$MIBYAN_HOME/.env``, found after the first, which may set ``MIBYAN_HOME``). A
variable already in the environment wins over both, and the first file over the second, so
an explicit ``export`` always decides. Only the CLI reads them; a library user loads theirs."""

from __future__ import annotations

from pathlib import Path

from pipeline import config as cfg

__all__ = ["load_dotenv_files"]


def load_dotenv_files(cwd: Path | None = None, home: Path | None = None) -> list[Path]:
    """Loads the ``.env`` files there are, without overriding; returns the ones read."""
    from dotenv import load_dotenv
    read = []
    for directory in (cwd or Path.cwd(), None):
        path = (directory if directory is not None else home or cfg.home()) / ".env"
        if path.is_file() and path not in read and load_dotenv(path, override=False):
            read.append(path)
    return read
