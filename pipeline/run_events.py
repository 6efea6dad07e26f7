"""The typed events of a running turn: what ``Agent.stream`` yields, what ``Agent.run``'s
``on_event`` receives, and what the gateway's event streams send (``to_dict``, as SSE events
named by ``type``).

    async for event in agent.stream("What's the weather in Oslo?"):
        match event:
            case TextDelta(text=text):
                print(text, end="")
            case ToolStarted(name=name):
                print(f"[{name}...]")
            case TurnFinished(result=result):
                print(result.usage)

They are read off the session machine as it runs (``RunEvents``): the asks it makes (tools
about to run, an approval awaited) and the events it logs (a tool's result, a retry, a fallback,
a compression). Their text is masked as the log keeps it: the agent's known secrets and the
shapes of secrets never reach a listener.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import attrs

from pipeline.result import TurnResult
from stages.decision import AskApproval, RunTools
from stages.log import events as log
from stages.log.redact import redact
from stages.turn.machine import Perform, Record

__all__ = ["ApprovalNeeded", "Compressed", "FellBack", "ReasoningDelta", "Retrying", "RunEvent",
           "RunEvents", "TextDelta", "ToolFinished", "ToolStarted", "TurnFinished"]


class _Typed:
    type: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data, with the event's ``type``."""
        return {"type": self.type, **attrs.asdict(self)}  # type: ignore[arg-type]


@attrs.frozen(kw_only=True)
class TextDelta(_Typed):
    """A piece of the model's answer as it streams."""

    type: ClassVar[str] = "text_delta"
    text: str


@attrs.frozen(kw_only=True)
class ReasoningDelta(_Typed):
    """A piece of the model's reasoning as it streams."""

    type: ClassVar[str] = "reasoning_delta"
    text: str


@attrs.frozen(kw_only=True)
class ToolStarted(_Typed):
    """A tool call about to run (``arguments``: its JSON text)."""

    type: ClassVar[str] = "tool_started"
    call_id: str
    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class ToolFinished(_Typed):
    """A tool call's result, as the model reads it."""

    type: ClassVar[str] = "tool_finished"
    call_id: str
    name: str
    ok: bool
    content: str
    error: str | None
    duration_ms: float


@attrs.frozen(kw_only=True)
class ApprovalNeeded(_Typed):
    """A dangerous command waits for the agent's ``approval_callback``."""

    type: ClassVar[str] = "approval_needed"
    call_id: str
    tool: str
    command: str
    pattern: str
    description: str


@attrs.frozen(kw_only=True)
class Compressed(_Typed):
    """The context was compressed (``summarised``: a summary replaced the middle)."""

    type: ClassVar[str] = "compression"
    before_tokens: int
    after_tokens: int
    summarised: bool


@attrs.frozen(kw_only=True)
class Retrying(_Typed):
    """A failed model call is tried again: ``action`` retry (after a backoff), refresh (the
    key's refresh hook) or rotate (another key); ``reason`` is the failure's class."""

    type: ClassVar[str] = "retry"
    reason: str
    action: str
    attempt: int


@attrs.frozen(kw_only=True)
class FellBack(_Typed):
    """The turn goes on with the next provider of the chain (``provider_index``)."""

    type: ClassVar[str] = "fallback"
    reason: str
    provider_index: int


@attrs.frozen(kw_only=True)
class TurnFinished(_Typed):
    """The turn ended; ``result`` describes it (``Agent.run``'s return value)."""

    type: ClassVar[str] = "turn_finished"
    result: TurnResult

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "result": self.result.as_dict()}


RunEvent = (TextDelta | ReasoningDelta | ToolStarted | ToolFinished | ApprovalNeeded
            | Compressed | Retrying | FellBack | TurnFinished)
_RETRIES = ("retry", "refresh", "rotate")


@attrs.define
class RunEvents:
    """Turns the session machine's asks and logged events into ``RunEvent`` s for ``sink``,
    masking ``known`` secrets."""

    sink: Callable[[RunEvent], object]
    known: Iterable[str] = ()

    def text_sink(self) -> Callable[[str], None]:
        """Where the answer's text streams (already masked by the agent's ``MaskedStream``)."""
        def sink(text: str) -> None:
            self.sink(TextDelta(text=text))
        return sink

    def reasoning_sink(self) -> Callable[[str], None]:
        def sink(text: str) -> None:
            self.sink(ReasoningDelta(text=text))
        return sink

    def asked(self, ask: Record | Perform) -> None:
        """Before an effect is performed."""
        if not isinstance(ask, Perform):
            return
        effect = ask.effect
        if isinstance(effect, RunTools):
            for call in effect.calls:
                self.sink(ToolStarted(call_id=call.call_id, name=call.name,
                                      arguments=self._masked(call.arguments)))
        elif isinstance(effect, AskApproval):
            self.sink(ApprovalNeeded(call_id=effect.call_id, tool=effect.tool,
                                     command=self._masked(effect.command),
                                     pattern=effect.pattern, description=effect.description))

    def logged(self, event: log.Event) -> None:
        """After ``event`` was appended to the log."""
        if isinstance(event, log.ToolRan):
            out = event.outcome
            self.sink(ToolFinished(call_id=out.call_id, name=out.name, ok=out.ok,
                                   content=self._masked(out.content),
                                   error=None if out.error is None else self._masked(out.error),
                                   duration_ms=out.duration_ms))
        elif isinstance(event, log.RecoveryDecided):
            if event.action in _RETRIES:
                self.sink(Retrying(reason=event.reason, action=event.action,
                                   attempt=event.attempt))
            elif event.action == "fallback":
                self.sink(FellBack(reason=event.reason, provider_index=event.provider_index))
        elif isinstance(event, log.ContextCompressed) and not event.disabled:
            self.sink(Compressed(before_tokens=event.before_tokens,
                                 after_tokens=event.after_tokens,
                                 summarised=event.summary is not None))

    def _masked(self, text: str) -> str:
        return redact(text, self.known)
