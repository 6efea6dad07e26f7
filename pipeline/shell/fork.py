"""Fork a session: replay its first records exactly, then go on live with other settings.

    fork = fork_session(agent, "s-1", at=12, model="gpt-4o")   # pipeline.agent -> Fork
    fork.agent.run("and now?")                                  # the forked session goes on
    agent.fork("s-1", at=12, model="gpt-4o")                    # the same, -> Agent

``at`` counts records: the fork keeps the origin's records with ``seq < at`` (re-derived and
compared on the way, so a fork of a session that no longer replays fails with the divergence),
then goes on live and records ``SessionForked`` (origin, ``at`` and the new settings) where they
start: a fork inside a turn finishes that turn live, under the new settings from the turn's next
step on (a model call being prepared when the prefix ends is made as prepared); a fork between
turns leaves the next turn to the caller. The fork is a new session under the same home, with a
new id; its records before ``SessionForked`` are the origin's (payload and ``recorded_at``; seq
0 carries the fork's id).

This module plans a fork and drives its session machine through the prefix; the agent bound to
the fork is made by ``pipeline.agent.fork_session``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.codec import from_payload
from effects.eventlog.envelope import Envelope
from effects.eventlog.store import read_envelopes, session_path
from effects.protocols import Clock
from pipeline.settings import check_session_values
from pipeline.shell.fork_journal import ForkJournal
from pipeline.shell.replay import drive
from pipeline.shell.runner import SessionRunner
from stages.errors import UsageError
from stages.fold import fold
from stages.log.api_mode import resolve_api_mode
from stages.log.events import Event, HistoryLoaded, SessionForked, SessionSettings, SessionSplit
from stages.log.state import State
from stages.log.tool_specs import ToolSpec
from stages.session.machine import ForkSwitch

_SESSION_FIELDS = frozenset(attrs.fields_dict(SessionSettings))


@attrs.frozen(kw_only=True)
class ForkPlan:
    """A fork checked and ready: the origin's records it keeps and the settings it goes on
    with."""

    origin_session_id: str
    origin_seq: int
    prefix: Sequence[Envelope]
    settings: SessionSettings


def check_at(at: object, count: int) -> int:
    """``at`` as a record count of a log with ``count`` records, or a ``UsageError``."""
    if at is None:
        return count
    if isinstance(at, bool) or not isinstance(at, int):
        raise UsageError(f"--at must be a whole number (a seq), got {at!r}")
    if not 1 <= at <= count:
        raise UsageError(f"--at {at} is out of range: the session has {count} records, so a fork "
                         f"keeps the first 1 to {count} (seq 0 to {count - 1})")
    return at


def _check_prefix(prefix: Sequence[Envelope]) -> None:
    if any(e.kind == SessionSplit.kind for e in prefix):
        raise UsageError("the session went on in a child session (compression) there; "
                         "fork the child instead")
    if prefix[-1].kind == HistoryLoaded.kind:
        seq = prefix[-1].seq
        raise UsageError(f"seq {seq + 1} splits a loaded history from its turn; fork at seq "
                         f"{seq} or {seq + 2}")


def check_changes(changes: dict[str, Any]) -> None:
    """A ``UsageError`` for a change that names no session setting or has a bad value."""
    unknown = set(changes) - _SESSION_FIELDS
    if unknown:
        raise UsageError(f"fork() got unknown settings: {', '.join(sorted(unknown))}")
    check_session_values(changes)


def forked_settings(base: SessionSettings, changes: dict[str, Any]) -> SessionSettings:
    """``base`` with ``changes`` (fields of ``SessionSettings``), checked; a new model,
    provider or endpoint without an explicit API mode is detected again."""
    check_changes(changes)
    changes = dict(changes)
    try:
        if {"model", "provider", "base_url", "api_mode"} & set(changes):
            merged = attrs.evolve(base, **{k: v for k, v in changes.items() if k != "api_mode"})
            mode = resolve_api_mode(explicit=changes.get("api_mode"), provider=merged.provider,
                                    base_url=merged.base_url, model=merged.model)
            changes.update(api_mode=mode.mode, api_mode_reason=mode.reason)
        return attrs.evolve(base, **changes)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"fork(): {exc}") from exc


def _origin(root: Path, session_id: str) -> list[Envelope]:
    path = session_path(root, session_id)
    if not path.exists():
        raise UsageError(f"no session {session_id!r} under {root}")
    return list(read_envelopes(path))


def plan_fork(root: Path, session_id: str, at: int | None,
              changes: dict[str, Any]) -> ForkPlan:
    """``session_id`` (under ``root``) forked after its first ``at`` records (all when None),
    going on with ``changes``; a ``UsageError`` for an unknown session, a bad ``at`` or
    setting."""
    envelopes = _origin(root, session_id)
    at = check_at(at, len(envelopes))
    prefix = envelopes[:at]
    _check_prefix(prefix)
    base = fold(from_payload(e.kind, e.schema_version, e.payload) for e in prefix).settings
    assert base is not None
    return ForkPlan(origin_session_id=session_id, origin_seq=at, prefix=prefix,
                    settings=forked_settings(base, changes))


def go_on(runner: SessionRunner, journal: ForkJournal, plan: ForkPlan, *, clock: Clock,
          tools: tuple[ToolSpec, ...]) -> bool:
    """Replay the prefix, finish live a turn it ends inside, and switch to the fork's settings
    and ``tools``; True when the switch came inside a turn. A prefix that fails to replay leaves
    no fork behind (``ReplayDivergenceError``)."""
    inside: list[bool] = []

    def switch(state: State) -> SessionForked:
        inside.append(state.turn is not None and state.turn.finished is None)
        return SessionForked(origin_session_id=plan.origin_session_id,
                             origin_seq=plan.origin_seq, forked_at=clock.now(),
                             settings=plan.settings)

    assert runner.performers is not None
    runner.performers.fork_switch = switch
    try:
        drive(runner, journal)
        if not runner.ended:
            runner.command(ForkSwitch(tools=tools))
    except BaseException:
        if not inside:
            journal.log.close()
            journal.log.path.unlink(missing_ok=True)
        raise
    return inside == [True]


def live_only(listener: Callable[[Event], None] | None,
              journal: ForkJournal) -> Callable[[Event], None] | None:
    """``listener``, deaf to the replayed prefix: it is the origin's past, not news (a chat
    would print every earlier answer again)."""
    if listener is None:
        return None

    def hear(event: Event) -> None:
        if not journal.replayed:
            listener(event)
    return hear
