"""A session's trajectory read back from its event log: every message the history ever held,
who put it there (which event, which model, provider and credential label), and where the
context was compressed.

The log is folded event by event with the same ``apply_event`` live runs use; each event's
effect on the history is either an append (a user message, a reply, a tool result, a note) or a
replacement (a compression, a loaded history, a child session's inherited context). A
replacement starts a new :class:`Segment`: what the model saw from then on. A session that
compression continued in a child (``session_split``) is read with its descendants, so one
:class:`Lineage` holds the whole conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

from effects.eventlog.codec import from_payload
from effects.eventlog.envelope import session_path, strict_lines
from effects.eventlog.keys import keyring_of
from stages.errors import UsageError
from stages.fold import apply_event
from stages.log import events as ev
from stages.log.messages import Message
from stages.log.state import State
from stages.log.tool_specs import ToolSpec

__all__ = ["Approval", "Compression", "Entry", "Lineage", "LogSpan", "Segment", "TurnInfo",
           "read_lineage"]

# Events that replace the history rather than add to it.
_REPLACING = (ev.ContextCompressed, ev.ContextInherited, ev.HistoryLoaded)


@attrs.frozen(kw_only=True)
class Entry:
    """One history message and where it came from. ``inherited`` messages were carried over by
    a compression or a loaded history: context for what follows, not produced here.
    ``synthetic`` marks a note the engine wrote (a turn that ended without a reply);
    ``copied``, what a fork's log repeats of the session it was forked from."""

    message: Message
    session_id: str
    seq: int
    turn: int | None = None
    inherited: bool = False
    synthetic: bool = False
    copied: bool = False
    model: str | None = None
    provider: str | None = None
    credential: str | None = None


@attrs.frozen(kw_only=True)
class Compression:
    """Where the context was replaced: ``message_index`` is the position in the stitched
    conversation from which the model saw the compressed context."""

    session_id: str
    seq: int
    message_index: int
    before_tokens: int | None = None
    after_tokens: int | None = None


@attrs.frozen(kw_only=True)
class Approval:
    session_id: str
    seq: int
    call_id: str
    pattern: str
    choice: str
    source: str


@attrs.frozen(kw_only=True)
class TurnInfo:
    """One user turn: who served its model calls (credential labels only, never keys)."""

    session_id: str
    seq: int
    turn_id: str
    task_id: str
    started_at: str
    models: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    credentials: tuple[str, ...] = ()
    exit_reason: str | None = None
    completed: bool = False
    fallback: bool = False
    # Structured output: the turn's final answer, validated, as JSON text.
    output: str | None = None


@attrs.frozen(kw_only=True)
class LogSpan:
    """A range of one session's log; ``log_hash`` is the chain hash of its last record, so the
    span can be checked against the log it came from."""

    session_id: str
    first_seq: int
    last_seq: int
    log_hash: str


@attrs.frozen(kw_only=True)
class Segment:
    """What the model saw between two context replacements; a segment goes on across a session
    split (the child inherits exactly the history its parent ended with)."""

    spans: tuple[LogSpan, ...]
    system_prompt: str | None
    entries: tuple[Entry, ...]
    compression: Compression | None = None


@attrs.frozen(kw_only=True)
class Lineage:
    """A root session and the sessions compression continued it in."""

    session_id: str
    started_at: str | None
    model: str | None
    spans: tuple[LogSpan, ...]
    segments: tuple[Segment, ...]
    tools: tuple[ToolSpec, ...]
    turns: tuple[TurnInfo, ...]
    compressions: tuple[Compression, ...]
    approvals: tuple[Approval, ...]

    @property
    def completed(self) -> bool:
        """Every turn ended completed (and there was one)."""
        return bool(self.turns) and all(t.completed for t in self.turns)

    @property
    def stitched(self) -> tuple[Entry, ...]:
        """The whole conversation as if never compressed: the first segment, then what each
        later segment added."""
        out: list[Entry] = []
        for index, segment in enumerate(self.segments):
            out.extend(e for e in segment.entries if index == 0 or not e.inherited)
        return tuple(out)


@attrs.define
class _Reader:
    """Accumulates a lineage while the logs are folded, one event at a time."""

    stitched: int = 0
    segments: list[Segment] = attrs.Factory(list)
    entries: list[Entry] = attrs.Factory(list)
    spans: list[LogSpan] = attrs.Factory(list)
    compression: Compression | None = None
    system_prompt: str | None = None
    prompt_seen: bool = False
    first_seq: int = 0
    tools: dict[str, ToolSpec] = attrs.Factory(dict)
    turns: list[TurnInfo] = attrs.Factory(list)
    compressions: list[Compression] = attrs.Factory(list)
    approvals: list[Approval] = attrs.Factory(list)
    provider: str | None = None
    split_to: str | None = None
    last: tuple[str, int, str] = ("", 0, "")

    def end_span(self, next_seq: int) -> None:
        """The current segment's part of this session's log ends at the last record read."""
        session_id, seq, digest = self.last
        if session_id and self.first_seq <= seq:
            self.spans.append(LogSpan(session_id=session_id, first_seq=self.first_seq,
                                      last_seq=seq, log_hash=digest))
        self.first_seq = next_seq

    def close_segment(self) -> None:
        if self.entries:
            self.segments.append(Segment(spans=tuple(self.spans), system_prompt=self.system_prompt,
                                         entries=tuple(self.entries),
                                         compression=self.compression))
        self.entries, self.spans, self.compression, self.prompt_seen = [], [], None, False

    def replaced(self, event: ev.Event, after: State, session_id: str, seq: int) -> None:
        if isinstance(event, ev.ContextInherited) and self.entries:
            return  # the parent's segment goes on in its child
        self.end_span(seq)
        self.close_segment()
        if isinstance(event, ev.ContextCompressed | ev.ContextInherited):
            self.compression = Compression(
                session_id=session_id, seq=seq, message_index=self.stitched,
                before_tokens=getattr(event, "before_tokens", None),
                after_tokens=getattr(event, "after_tokens", None))
            self.compressions.append(self.compression)
        self.entries = [Entry(message=m, session_id=session_id, seq=seq, inherited=True)
                        for m in after.messages]
        if not self.segments:  # what a lineage begins with is the start of the stitched whole
            self.stitched += len(self.entries)

    def appended(self, event: ev.Event, before: State, messages: tuple[Message, ...],
                 session_id: str, seq: int) -> None:
        turn = len(self.turns) - 1 if self.turns else None  # noted() saw a TurnStarted
        for message in messages:
            entry = Entry(message=message, session_id=session_id, seq=seq, turn=turn,
                          synthetic=isinstance(event, ev.TurnFinished))
            if isinstance(event, ev.ModelReplied):
                credential = before.turn.credential_id if before.turn is not None else None
                entry = attrs.evolve(entry, model=event.model, provider=self.provider,
                                     credential=credential)
                self._served(event.model, self.provider, credential)
            self.entries.append(entry)
            self.stitched += 1

    def forked(self) -> None:
        """A fork's records so far repeat its origin's (exported with the origin): context
        here, not produced here."""
        def copied(entries: Iterable[Entry]) -> list[Entry]:
            return [attrs.evolve(e, copied=True) for e in entries]
        self.entries = copied(self.entries)
        self.segments = [attrs.evolve(s, entries=tuple(copied(s.entries)))
                         for s in self.segments]

    def _served(self, model: str, provider: str | None, credential: str | None) -> None:
        if not self.turns:
            return
        turn = self.turns[-1]
        self.turns[-1] = attrs.evolve(
            turn, models=_add(turn.models, model), providers=_add(turn.providers, provider),
            credentials=_add(turn.credentials, credential))

    def noted(self, event: ev.Event, after: State, session_id: str, seq: int) -> None:
        """Bookkeeping that does not touch the history."""
        if isinstance(event, ev.TurnStarted):
            self.turns.append(TurnInfo(session_id=session_id, seq=seq, turn_id=event.turn_id,
                                       task_id=event.task_id, started_at=event.started_at))
        elif isinstance(event, ev.ModelRequested):
            self.provider = event.provider
            if not self.prompt_seen:  # the segment's prompt: that of its first request
                self.system_prompt, self.prompt_seen = after.system_prompt, True
        elif isinstance(event, ev.SessionSplit):
            self.split_to = event.child_session_id
        elif isinstance(event, ev.SessionForked):
            self.forked()
        elif isinstance(event, ev.ToolsDeclared):
            self.tools.update((spec.name, spec) for spec in event.tools)
        elif isinstance(event, ev.ApprovalAnswered):
            self.approvals.append(Approval(session_id=session_id, seq=seq,
                                           call_id=event.call_id, pattern=event.pattern,
                                           choice=event.choice, source=event.source))
        elif isinstance(event, ev.RecoveryDecided) and event.action == "fallback" and self.turns:
            self.turns[-1] = attrs.evolve(self.turns[-1], fallback=True)
        elif isinstance(event, ev.OutputChecked) and event.valid and self.turns:
            self.turns[-1] = attrs.evolve(self.turns[-1], output=event.output)
        elif isinstance(event, ev.TurnFinished) and self.turns:
            self.turns[-1] = attrs.evolve(self.turns[-1], exit_reason=event.exit_reason,
                                          completed=event.completed)


def _add(values: tuple[str, ...], value: str | None) -> tuple[str, ...]:
    return values if value is None or value in values else (*values, value)


def _events(root: Path, session_id: str) -> Iterator[tuple[int, str, ev.Event]]:
    """``(seq, chain hash, event)`` of a session's log, checked line by line."""
    path = session_path(root, session_id)
    if not path.exists():
        raise UsageError(f"no session {session_id!r} under {root}")
    with open(path, "rb") as fh:
        for line in strict_lines(fh, session_id, path, keyring_of(root)):
            envelope = line.envelope
            if envelope is None:  # a torn tail: the writer's next open cuts it
                return
            event = from_payload(envelope.kind, envelope.schema_version, envelope.payload)
            yield envelope.seq, line.digest, event


def _read_session(root: Path, session_id: str, reader: _Reader) -> tuple[State, LogSpan]:
    state, seq, digest = State(), 0, ""
    reader.first_seq = 0
    for seq, digest, event in _events(root, session_id):
        after = apply_event(state, event)
        reader.noted(event, after, session_id, seq)
        if isinstance(event, _REPLACING) or len(after.messages) < len(state.messages):
            reader.replaced(event, after, session_id, seq)
        elif len(after.messages) > len(state.messages):
            added = tuple(after.messages[len(state.messages):])
            reader.appended(event, state, added, session_id, seq)
        reader.last = (session_id, seq, digest)
        state = after
    reader.end_span(0)
    return state, LogSpan(session_id=session_id, first_seq=0, last_seq=seq, log_hash=digest)


def read_lineage(root: Path, session_id: str) -> Lineage:
    """The lineage starting at ``session_id``: its log, then each child compression continued
    it in (a child missing from ``root`` ends the lineage)."""
    reader, spans, seen = _Reader(), [], set()
    current: str | None = session_id
    first: State | None = None
    while current is not None and current not in seen:
        seen.add(current)
        state, span = _read_session(root, current, reader)
        first = first or state
        spans.append(span)
        current, reader.split_to = reader.split_to, None
        if current is not None and not session_path(root, current).exists():
            current = None
    reader.close_segment()
    assert first is not None
    settings = first.settings
    return Lineage(session_id=session_id, started_at=first.started_at,
                   model=settings.model if settings is not None else None, spans=tuple(spans),
                   segments=tuple(reader.segments), tools=tuple(reader.tools.values()),
                   turns=tuple(reader.turns), compressions=tuple(reader.compressions),
                   approvals=tuple(reader.approvals))

