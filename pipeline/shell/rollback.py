"""Rollback of the working tree from a session's log: which checkpoint a turn (or a fork point)
goes back to, and a rollback of a session no process holds open (``mibyan rollback``).

An open session rolls back through its own machine (``Agent.rollback``: the ``RollBack``
command, whose outcome ``TreeRestored`` is in its log); a closed one is restored here from the
checkpoints its log names, and the rollback is a log line.
"""

from __future__ import annotations

from pathlib import Path

from effects.eventlog import lineage
from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from effects.logs import get_logger
from effects.tools.checkpoints import CheckpointStore
from stages.errors import UsageError
from stages.log.events import Checkpointed, TreeRestored
from stages.tools.checkpoints import checkpoint_of

log = get_logger(__name__)


def _log_path(home: Path, session_id: str) -> Path:
    path = session_path(home / "sessions", session_id)
    if not path.exists():
        raise UsageError(f"no session {session_id!r} under {home / 'sessions'}")
    return path


def checkpoint_for(home: Path, session_id: str, turn: int | None) -> Checkpointed:
    """The checkpoint taken before ``turn`` of ``session_id`` (None: the latest); a
    ``UsageError`` when it has none."""
    found = checkpoint_of(lineage.folded_log(_log_path(home, session_id)).checkpoints, turn)
    if found is None:
        which = "any turn" if turn is None else f"turn {turn}"
        raise UsageError(f"session {session_id} has no checkpoint of {which}")
    return found


def checkpoint_after(home: Path, session_id: str, seq: int) -> Checkpointed | None:
    """The tree as it was after the first ``seq`` records: the first checkpoint taken from
    there on (None: nothing changed the tree after that point, as far as the log says)."""
    for index, envelope in enumerate(read_envelopes(_log_path(home, session_id))):
        if index >= seq and envelope.kind == Checkpointed.kind:
            event = from_payload(envelope.kind, envelope.schema_version, envelope.payload)
            assert isinstance(event, Checkpointed)
            if event.commit is not None:
                return event
    return None


def roll_back(home: Path, target: Checkpointed, *, session_id: str) -> TreeRestored:
    """Put ``target``'s tree back to it, outside any session machine; the rollback is logged."""
    assert target.commit is not None
    done = CheckpointStore(home / "checkpoints").restore(Path(target.tree), target.commit)
    log.info("tree_restored", session_id=session_id, tree=target.tree, turn=target.turn,
             commit=target.commit, saved=done.saved, removed=done.removed,
             restored=done.restored)
    return TreeRestored(turn=target.turn, tree=target.tree, commit=target.commit,
                        saved=done.saved, removed=done.removed, restored=done.restored)
