"""What a session's logs tell of it, for the gateway's sessions it has not opened since it
started (after a restart, or after one was closed to bound memory): when the session began,
its model, how many turns it ran, its lineage and its history. A session open since its
creation tells the same, so a client sees no difference across a restart.

A log's facts are kept with its size and modification time: listing an owner's sessions
again reads only the logs that changed since (a ``stat`` each for the others).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterable
from pathlib import Path

import attrs

from effects.eventlog.codec import from_payload
from effects.eventlog.envelope import Envelope
from effects.eventlog.lineage import folded_log
from effects.eventlog.store import read_envelopes, session_path
from stages.errors import LogError
from stages.log.events import (
    SessionForked,
    SessionResumed,
    SessionSplit,
    SessionStarted,
    TurnStarted,
)
from stages.log.messages import Message

_SETTINGS = (SessionStarted.kind, SessionResumed.kind, SessionForked.kind)


@attrs.frozen(kw_only=True)
class Facts:
    """One log's part of its session: when it began (a fork: when it was forked, not its
    origin's start, which its first records repeat), the model it last ran with, its turns,
    and the log the session went on in (a compression's child)."""

    began: str | None = None
    model: str | None = None
    turns: int = 0
    child: str | None = None


@attrs.frozen(kw_only=True)
class Logged:
    """A session as its logs tell it: ``created`` in seconds since the epoch (None without a
    readable log), ``lineage`` its logs from the first to the one it goes on in."""

    created: int | None
    model: str | None
    turns: int
    lineage: tuple[str, ...]


def _facts(envelopes: Iterable[Envelope]) -> Facts:
    facts = Facts()
    for envelope in envelopes:
        kind = envelope.kind
        if kind == TurnStarted.kind:
            facts = attrs.evolve(facts, turns=facts.turns + 1)
        elif kind == SessionSplit.kind:
            facts = attrs.evolve(facts, child=envelope.payload["child_session_id"])
        elif kind in _SETTINGS:
            event = from_payload(kind, envelope.schema_version, envelope.payload)
            assert isinstance(event, SessionStarted | SessionResumed | SessionForked)
            began = (event.started_at if isinstance(event, SessionStarted) else
                     event.forked_at if isinstance(event, SessionForked) else facts.began)
            facts = attrs.evolve(facts, began=began, model=event.settings.model)
    return facts


def _seconds(timestamp: str | None) -> int | None:
    return None if timestamp is None else int(dt.datetime.fromisoformat(timestamp).timestamp())


class SessionLogs:
    """The session logs under ``root``, read for what they tell of their sessions."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._known: dict[str, tuple[tuple[int, int], Facts]] = {}
        self._lock = threading.Lock()

    def facts(self, log_id: str) -> Facts | None:
        """The log's facts, None when it is gone. A log that breaks off (a corrupt record)
        tells what its good records do: it is described, not checked, here."""
        path = session_path(self.root, log_id)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        key = (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            known = self._known.get(log_id)
        if known is not None and known[0] == key:
            return known[1]
        read: list[Envelope] = []
        with contextlib.suppress(LogError):
            read.extend(read_envelopes(path))
        facts = _facts(read)
        with self._lock:
            self._known[log_id] = (key, facts)
        return facts

    def __contains__(self, log_id: str) -> bool:
        with self._lock:
            return log_id in self._known

    def forget(self, log_ids: Iterable[str]) -> None:
        """Drop what is kept of these logs (a deleted session's): a gateway that makes and
        deletes sessions for months keeps nothing of them."""
        with self._lock:
            for log_id in log_ids:
                self._known.pop(log_id, None)

    def describe(self, session_id: str) -> Logged:
        """The session whose first log is ``session_id``, along its lineage."""
        lineage, turns = [session_id], 0
        first = last = self.facts(session_id)
        while last is not None:
            turns += last.turns
            child = last.child
            if child is None or child in lineage:
                break
            following = self.facts(child)
            if following is None:
                break
            lineage.append(child)
            last = following
        return Logged(created=_seconds(first.began if first else None),
                      model=last.model if last else None, turns=turns, lineage=tuple(lineage))

    def history(self, log_id: str) -> tuple[Message, ...]:
        """The history the log folds to (the session's, when it is the newest of its
        lineage)."""
        path = session_path(self.root, log_id)
        if not path.exists():
            return ()
        return tuple(folded_log(path).messages)
