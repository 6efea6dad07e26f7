"""``--resume SESSION`` of ``run`` and ``chat``: an unknown session is said to be one before
anything else is chosen, started or printed."""

from __future__ import annotations

from pathlib import Path

from pipeline import config as cfg

__all__ = ["check_resume"]


def check_resume(home: Path | None, session_id: str | None) -> None:
    from effects.eventlog.store import session_path
    from stages.errors import UsageError
    root = (home or cfg.home()) / "sessions"
    if session_id and not session_path(root, session_id).exists():
        raise UsageError(f"no session {session_id!r} under {root}")
