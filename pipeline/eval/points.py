"""Where a recorded session forks, as record counts (``at``: the fork keeps ``seq < at``).

* ``turns``: each turn, just before its ``turn_started``: the fork asks the turn's message
  again, so every setting (the system prompt included) holds from the turn's start;
* ``last-turn``: the last turn only;
* ``first-tool-result``: after the first batch of tool results of each turn (a batch is never
  split: a fork inside one is refused);
* ``kind:<kind>``: after each turn's first record of that kind.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from effects.eventlog.envelope import Envelope

__all__ = ["ForkPoint", "fork_points"]

_TOOL = "tool_ran"


@attrs.frozen(kw_only=True)
class ForkPoint:
    session_id: str
    at: int
    point: str  # the name it was chosen by
    turn: int  # the turn it falls in, counted from 0
    # A fork before a turn asks its message again (with its system message and task id).
    message: str | None = None
    system: str | None = None
    task_id: str | None = None


def _turns(log: Sequence[Envelope]) -> list[list[Envelope]]:
    turns: list[list[Envelope]] = []
    for envelope in log:
        if envelope.kind == "turn_started":
            turns.append([])
        if turns:
            turns[-1].append(envelope)
    return turns


def _after_tools(turn: list[Envelope]) -> int | None:
    for i, envelope in enumerate(turn):
        if envelope.kind == _TOOL:
            end = i
            while end + 1 < len(turn) and turn[end + 1].kind == _TOOL:
                end += 1
            return turn[end].seq + 1
    return None


def _first_of(turn: list[Envelope], kind: str) -> int | None:
    return next((e.seq + 1 for e in turn if e.kind == kind), None)


def fork_points(session_id: str, log: Sequence[Envelope],
                points: Sequence[str]) -> list[ForkPoint]:
    """The fork points of one session's log, each at most once, in log order."""
    turns = _turns(log)
    found: dict[int, ForkPoint] = {}
    for name in points:
        for index, turn in enumerate(turns):
            if name == "last-turn" and index != len(turns) - 1:
                continue
            if name in ("turns", "last-turn"):
                start = turn[0]
                if start.seq not in found:
                    found[start.seq] = ForkPoint(
                        session_id=session_id, at=start.seq, point=name, turn=index,
                        message=start.payload.get("user_message"),
                        system=start.payload.get("system_message"),
                        task_id=start.payload.get("task_id"))
                continue
            if name == "first-tool-result":
                at = _after_tools(turn)
            else:
                at = _first_of(turn, name.removeprefix("kind:"))
            if at is not None and at not in found:
                found[at] = ForkPoint(session_id=session_id, at=at, point=name, turn=index)
    return [found[at] for at in sorted(found)]
