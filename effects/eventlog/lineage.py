"""Session lineage: a compression continues the session in a child session.

After a turn that compressed the context, the child's log starts with the parent's id and the
compressed history (``ContextInherited``); then the parent's log says where the session went
(``SessionSplit``). The child is written first: a crash in between leaves an orphan child and a
parent that still goes on, never a parent pointing nowhere. The session machine
(``stages.session.machine``) asks for the split; ``pipeline.agent`` performs it; this module
reads the chain back from the logs. Resuming any
session of a chain (``Agent(session_id=...)``, ``--resume``) opens its newest descendant.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from stages.fold import fold
from stages.log.events import ContextInherited, SessionSplit, TurnStarted
from stages.log.state import State


def folded_log(path: Path) -> State:
    """The state the log at ``path`` folds to."""
    return fold(from_payload(e.kind, e.schema_version, e.payload) for e in read_envelopes(path))


def _child_of(path: Path) -> str | None:
    child = None
    for envelope in read_envelopes(path):
        if envelope.kind == SessionSplit.kind:
            child = envelope.payload["child_session_id"]
    return child


def _walk(root: Path, session_id: str, step: Callable[[Path], str | None]) -> str:
    """Follow ``step`` (a log's next session along the chain) while it names a log that
    exists; the last session reached (loops are cut)."""
    seen: set[str] = set()
    while session_id not in seen:
        seen.add(session_id)
        following = step(session_path(root, session_id))
        if following is None or not session_path(root, following).exists():
            break
        session_id = following
    return session_id


def newest(root: Path, session_id: str) -> str:
    """The newest session of the chain ``session_id`` belongs to (itself when it has none)."""
    return _walk(root, session_id, _child_of)


def _parent_of(path: Path) -> str | None:
    """The parent named by a child's ``context_inherited``, among its first records."""
    for envelope in read_envelopes(path):
        if envelope.kind == ContextInherited.kind:
            return envelope.payload["parent_session_id"]
        if envelope.kind == TurnStarted.kind:
            return None
    return None


def oldest(root: Path, session_id: str) -> str:
    """The first session of the chain ``session_id`` belongs to (the root of its lineage)."""
    return _walk(root, session_id, _parent_of)


__all__ = ["folded_log", "newest", "oldest"]
