"""What one turn came to: ``TurnResult``, read off the folded state. ``Agent.run`` returns it;
``Agent.run_conversation`` returns its ``as_dict()``, the dict users of the seeds' API expect."""

from __future__ import annotations

import json
import operator
from typing import Any

import attrs

from stages.log.events import TurnFinished, Usage
from stages.log.messages import Message, ToolCall
from stages.log.pause_events import PendingApproval
from stages.log.ratelimits import format_usage
from stages.log.state import State, TurnState
from stages.prompt.untrusted import unwrapped
from stages.recovery.reasoning import last_reasoning

CLIENT_CALLS = "client_tool_calls"
AWAITING = "awaiting_approval"
"""The exit reason of a turn that stopped for approvals (it is not over)."""


@attrs.frozen(kw_only=True)
class TurnResult:
    """``messages`` is the session's history after the turn (without the system prompt);
    ``model`` and ``provider`` are those that answered (a fallback may have); ``usage`` is this
    turn's, ``session_usage`` the whole session's; ``rate_limits`` is the provider's last
    rate-limit headers as text, or None; ``warnings`` name context files, hints, skills or
    memory entries that were blocked (prompt injection) or truncated this turn."""

    final_response: str | None
    messages: tuple[Message, ...]
    api_calls: int
    completed: bool
    interrupted: bool
    failed: bool
    error: str | None
    turn_exit_reason: str
    model: str
    provider: str
    usage: Usage
    session_usage: Usage
    rate_limits: str | None
    session_id: str | None
    task_id: str
    # Context that was blocked as a prompt injection or truncated this turn.
    warnings: tuple[str, ...] = ()
    # The most recent non-empty reasoning of this turn (never of an earlier one).
    last_reasoning: str | None = None
    # Structured output: the validated answer (``Agent.run``'s ``output_type``; as JSON data
    # where the type is not at hand), or None.
    output: Any = None
    # Rules 8: the calls to the caller's own tools the turn ended on (``client_tool_calls``),
    # for the caller to run and answer with the next turn's ``tool_results``.
    tool_calls: tuple[ToolCall, ...] = ()
    # The turn stopped for these calls' approvals (``turn_exit_reason`` "awaiting_approval");
    # it goes on with ``Agent.resume(decisions)``, in this process or another.
    pending_approvals: tuple[PendingApproval, ...] = ()

    @property
    def paused(self) -> bool:
        return bool(self.pending_approvals)

    @classmethod
    def from_state(cls, state: State) -> TurnResult:
        turn, settings = state.turn, state.settings
        if turn is not None and turn.waiting:
            finished: TurnFinished | None = TurnFinished(
                exit_reason=AWAITING, final_response=None, completed=False)
        else:
            finished = turn.finished if turn is not None else None
        if turn is None or finished is None or settings is None:
            raise ValueError("no finished turn to describe")
        answered = settings.chain[turn.provider_index]
        return cls(
            # A slice copies the history at C speed (iterating it is a Python step a message).
            final_response=finished.final_response, messages=state.messages[:],
            api_calls=turn.api_calls, completed=finished.completed,
            interrupted=finished.interrupted, failed=finished.failed, error=finished.error,
            turn_exit_reason=finished.exit_reason, model=answered.model,
            provider=answered.provider, usage=turn.usage, session_usage=state.usage,
            rate_limits=format_usage(state.rate_limits) if state.rate_limits else None,
            session_id=state.session_id, task_id=turn.task_id, warnings=turn.warnings,
            last_reasoning=last_reasoning(state), output=_output(turn),
            tool_calls=turn.pending if finished.exit_reason == CLIENT_CALLS else (),
            pending_approvals=turn.waiting)

    def as_dict(self, returned: ReturnedMessages | None = None) -> dict[str, Any]:
        """Plain data: ``messages`` in OpenAI format, ``usage`` and ``session_usage`` as dicts
        of ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``,
        ``reasoning_tokens``, ``total_tokens``. ``returned`` converts the messages remembering
        the results it converted before (an agent's, whose histories share their prefix)."""
        return {
            "final_response": self.final_response,
            "messages": ([_returned(m) for m in self.messages] if returned is None
                         else returned(self.messages)),
            "api_calls": self.api_calls,
            "completed": self.completed,
            "interrupted": self.interrupted,
            "failed": self.failed,
            "error": self.error,
            "turn_exit_reason": self.turn_exit_reason,
            "model": self.model,
            "provider": self.provider,
            "usage": self.usage.as_dict(),
            "session_usage": self.session_usage.as_dict(),
            "rate_limits": self.rate_limits,
            "session_id": self.session_id,
            "task_id": self.task_id,
            "warnings": list(self.warnings),
            "last_reasoning": self.last_reasoning,
            "output": None if self.output is None else _jsonable(self.output),
            "tool_calls": [c.to_openai() for c in self.tool_calls] if self.tool_calls else [],
            "pending_approvals": ([attrs.asdict(p) for p in self.pending_approvals]
                                  if self.pending_approvals else []),
        }


def _jsonable(value: Any) -> Any:
    """A typed output (a model, a dataclass) as JSON data; pydantic only loads for one."""
    from pydantic_core import to_jsonable_python
    return to_jsonable_python(value)


def _output(turn: TurnState) -> Any:
    """The answer's validated JSON value: a valid check always ends the turn with it."""
    checked = turn.output_checked
    return None if checked is None or not checked.valid or checked.output is None \
        else json.loads(checked.output)


def turn_result(state: State) -> dict[str, Any]:
    """The finished turn of ``state`` as the dict ``run_conversation`` returns."""
    return TurnResult.from_state(state).as_dict()


class ReturnedMessages:
    """Messages as ``as_dict`` returns them, each converted once over a run of results.

    A session's history after a turn begins with the very messages it held before, so the
    results of its turns share a prefix that ``as_dict`` converted already. Each message's
    dict is kept; the caller gets a fresh copy every time (a dict it edits is its own): a text
    message's is a shallow copy, made at C speed, since its values are all immutable; one with
    tool calls, parts or reasoning parts (lists inside) is converted again."""

    def __init__(self) -> None:
        # The last messages; for each, its dict (text only) or itself (converted anew); and
        # where the first kept as itself is (the length: none is). One tuple, so that threads
        # never pair one history with another's conversions.
        self._last: tuple[tuple[Message, ...], list[Any], int] = ((), [], 0)

    def __call__(self, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
        old, kept, first = self._last
        same = list(map(operator.is_, messages, old))
        try:
            start = same.index(False)
        except ValueError:
            start = len(same)
        if start < len(messages) or start < len(kept):
            added = [_kept(m) for m in messages[start:]]
            if first >= start:  # none of the prefix kept is converted anew: is one added?
                types = list(map(type, added))
                first = start + (types.index(Message) if Message in types else len(added))
            kept = kept[:start] + added
            self._last = (messages, kept, first)
        if first == len(kept):
            return list(map(dict.copy, kept))
        return [k.copy() if type(k) is dict else _returned(k) for k in kept]


def _kept(message: Message) -> dict[str, Any] | Message:
    """What ``ReturnedMessages`` keeps of ``message``: its dict when a shallow copy of it is a
    whole copy (text content, no lists inside), else the message."""
    if type(message.content) is tuple or message.tool_calls or message.reasoning_parts:
        return message
    return _returned(message)


def _returned(message: Message) -> dict[str, Any]:
    """A message in OpenAI format as the caller gets it: a tool result as the tool returned
    it, not as the session sent it (rules 7 marks it as data; loaded back, it is marked
    again)."""
    out = message.to_openai()
    if message.role == "tool" and message.content is not None:
        out["content"] = unwrapped(message.text)
    return out
