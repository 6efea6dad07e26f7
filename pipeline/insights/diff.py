"""Compare two sessions turn by turn (``mibyan diff A B``), and two events field by field (the
readable part of a replay divergence).

    diff = diff_sessions(root, "s-1", "s-2")      # -> SessionDiff
    print("\\n".join(diff.lines()))

Each session is read from its log (nothing is replayed) into one ``TurnSummary`` per turn: the
user's message, the answer, the tool calls (name and arguments), the tokens, the models and the
latency (model calls plus tools, as measured). Cost is not shown: mibyan keeps no price table
yet. The two logs' common prefix (records equal but for the session id) says where a fork
parted from its origin.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.codec import from_payload
from effects.eventlog.envelope import Envelope
from effects.eventlog.store import read_envelopes, session_path
from stages.errors import UsageError
from stages.log.events import (
    ModelFailed,
    ModelReplied,
    SessionForked,
    ToolRan,
    TurnFinished,
    TurnStarted,
    Usage,
)

_WIDTH = 48


@attrs.frozen(kw_only=True)
class TurnSummary:
    user_message: str
    answer: str | None = None
    exit_reason: str = "unfinished"
    tool_calls: tuple[str, ...] = ()
    usage: Usage = Usage()
    models: tuple[str, ...] = ()
    model_calls: int = 0
    latency_ms: float = 0.0


@attrs.frozen(kw_only=True)
class SessionSummary:
    session_id: str
    records: int
    turns: tuple[TurnSummary, ...]
    forked_from: tuple[str, int] | None = None

    @property
    def usage(self) -> Usage:
        total = Usage()
        for t in self.turns:
            total = total + t.usage
        return total


def _turns(events: Iterable[Any]) -> list[TurnSummary]:
    turns: list[TurnSummary] = []

    def update(**changes: Any) -> None:
        if turns:
            turns[-1] = attrs.evolve(turns[-1], **changes)

    for e in events:
        if isinstance(e, TurnStarted):
            turns.append(TurnSummary(user_message=e.user_message))
        elif not turns:
            continue
        elif isinstance(e, ModelReplied):
            t = turns[-1]
            calls = tuple(f"{c.name}({c.arguments})" for c in e.message.tool_calls)
            update(usage=t.usage + e.usage, model_calls=t.model_calls + 1,
                   models=t.models if e.model in t.models else (*t.models, e.model),
                   tool_calls=t.tool_calls + calls, latency_ms=t.latency_ms + e.latency_ms)
        elif isinstance(e, ModelFailed):
            t = turns[-1]
            update(model_calls=t.model_calls + 1, latency_ms=t.latency_ms + e.latency_ms)
        elif isinstance(e, ToolRan):
            update(latency_ms=turns[-1].latency_ms + e.outcome.duration_ms)
        elif isinstance(e, TurnFinished):
            update(answer=e.final_response, exit_reason=e.exit_reason)
    return turns


def _read(root: Path, session_id: str) -> list[Envelope]:
    path = session_path(root, session_id)
    if not path.exists():
        raise UsageError(f"no session {session_id!r} under {root}")
    return list(read_envelopes(path))


def summarise(session_id: str, envelopes: Sequence[Envelope]) -> SessionSummary:
    events = [from_payload(e.kind, e.schema_version, e.payload) for e in envelopes]
    origin = next(((e.origin_session_id, e.origin_seq) for e in events
                   if isinstance(e, SessionForked)), None)
    return SessionSummary(session_id=session_id, records=len(envelopes),
                          turns=tuple(_turns(events)), forked_from=origin)


def common_prefix(a: Sequence[Envelope], b: Sequence[Envelope]) -> int:
    """How many leading records the two logs share (kind, version and payload; seq 0 but for
    its session id)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        px, py = x.payload, y.payload
        if x.seq == 0:
            px, py = {**px, "session_id": ""}, {**py, "session_id": ""}
        if (x.kind, x.schema_version, px) != (y.kind, y.schema_version, py):
            break
        n += 1
    return n


@attrs.frozen(kw_only=True)
class SessionDiff:
    a: SessionSummary
    b: SessionSummary
    common_records: int

    @property
    def same_answers(self) -> bool:
        return [t.answer for t in self.a.turns] == [t.answer for t in self.b.turns]

    def lines(self) -> list[str]:
        out = [_row("", self.a.session_id, self.b.session_id), _row("records", self.a.records,
                                                                    self.b.records)]
        for s in (self.a, self.b):
            if s.forked_from is not None:
                out.append(f"{s.session_id} is a fork of {s.forked_from[0]} at seq "
                           f"{s.forked_from[1]}")
        out.append(f"common prefix: {self.common_records} records")
        count = max(len(self.a.turns), len(self.b.turns))
        for i in range(count):
            ta = self.a.turns[i] if i < len(self.a.turns) else None
            tb = self.b.turns[i] if i < len(self.b.turns) else None
            out.append(f"turn {i + 1}" + ("" if _same(ta, tb) else "  (differs)"))
            out.extend(_turn_rows(ta, tb))
        ua, ub = self.a.usage, self.b.usage
        out.append("total")
        out.append(_row("  tokens in/out", f"{ua.input_tokens}/{ua.output_tokens}",
                        f"{ub.input_tokens}/{ub.output_tokens}"))
        return out


def _same(a: TurnSummary | None, b: TurnSummary | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.user_message, a.answer, a.tool_calls, a.usage, a.models) == (
        b.user_message, b.answer, b.tool_calls, b.usage, b.models)


def _turn_rows(a: TurnSummary | None, b: TurnSummary | None) -> list[str]:
    def get(t: TurnSummary | None, f: str) -> object:
        return "-" if t is None else _FIELDS[f](t)
    return [_row(f"  {name}", get(a, name), get(b, name)) for name in _FIELDS]


_FIELDS: dict[str, Any] = {
    "user": lambda t: t.user_message,
    "answer": lambda t: t.answer if t.answer is not None else f"({t.exit_reason})",
    "tool calls": lambda t: ", ".join(t.tool_calls) or "none",
    "models": lambda t: ", ".join(t.models) or "-",
    "model calls": lambda t: t.model_calls,
    "tokens in/out": lambda t: f"{t.usage.input_tokens}/{t.usage.output_tokens}",
    "latency": lambda t: f"{t.latency_ms:.0f} ms",
}


def _cell(value: object) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= _WIDTH else text[:_WIDTH - 3] + "..."


def _row(label: str, a: object, b: object) -> str:
    mark = " " if str(a) == str(b) else "|"
    return f"{label:<16}{_cell(a):<{_WIDTH}} {mark} {_cell(b)}".rstrip()


def diff_sessions(root: Path, a: str, b: str) -> SessionDiff:
    """The two sessions under ``root`` side by side; an unknown one is a ``UsageError``."""
    ea, eb = _read(root, a), _read(root, b)
    return SessionDiff(a=summarise(a, ea), b=summarise(b, eb), common_records=common_prefix(ea, eb))


# --- one event against another (a replay divergence) ----------------------------------------


def _parse(text: str) -> tuple[str, Any]:
    kind, _, rest = text.partition(" ")
    try:
        return kind, json.loads(rest)
    except ValueError:
        return kind, rest


def _walk(path: str, a: Any, b: Any, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            _walk(f"{path}.{key}" if path else key, a.get(key, "(absent)"),
                  b.get(key, "(absent)"), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(f"{path}[{i}]", x, y, out)
    elif a != b:
        out.append((path or "(payload)", a, b))


def field_diff(expected: str, produced: str) -> list[str]:
    """The fields that differ between two events written as ``kind {payload json}`` (how a
    ``ReplayDivergenceError`` carries them), one line each."""
    ka, pa = _parse(expected)
    kb, pb = _parse(produced)
    if ka != kb or not isinstance(pa, dict) or not isinstance(pb, dict):
        return [f"  expected: {_short(expected)}", f"  produced: {_short(produced)}"]
    found: list[tuple[str, Any, Any]] = []
    _walk("", pa, pb, found)
    return [f"  {ka}.{p}: expected {_short(json.dumps(x))}, produced {_short(json.dumps(y))}"
            for p, x, y in found] or [f"  {ka}: equal payloads (the versions differ)"]


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"
