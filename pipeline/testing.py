"""Test doubles for agents built on mibyan: a scripted model client, a fake clock, counting ids.

    from pipeline import Agent
    from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls

    model = ScriptedModel(tool_calls(("add", {"a": 1, "b": 2})), "It is 3.")
    agent = Agent(client=model, tools=[add], clock=FakeClock(), ids=CountingIds(), home=tmp)
    assert agent.chat("1 + 2?") == "It is 3."
    model.assert_complete()                     # every scripted step was asked for

``ScriptedModel`` is strict: a call with no step left fails (the turn raises
``UnexpectedModelCall``, an ``AssertionError``), and ``assert_complete()`` fails while steps are
left. ``FakeClock.sleep`` advances the clock instead of waiting, so backoffs and cooldowns
cost no wall-clock time.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from effects.protocols import CancelToken, DeltaSink
from stages.decision import ModelRequest
from stages.log.events import ModelReplied, Usage
from stages.log.messages import Message, ToolCall

__all__ = ["CountingIds", "FakeClock", "ScriptedModel", "Step", "ToolCalls",
           "UnexpectedModelCall", "tool_calls"]

# 2026-01-01T00:00:00Z: a fixed start, so that two runs of a test log the same times.
START_EPOCH = 1_767_225_600.0


class UnexpectedModelCall(AssertionError):
    """The scripted model was called with no step left."""


@attrs.frozen
class ToolCalls:
    """A reply that calls tools: ``(name, arguments)`` pairs, arguments a dict or JSON text."""

    calls: tuple[tuple[str, Mapping[str, Any] | str], ...]
    content: str | None = None


def tool_calls(*calls: tuple[str, Mapping[str, Any] | str], content: str | None = None
               ) -> ToolCalls:
    return ToolCalls(calls=tuple(calls), content=content)


# A step: text to answer with, tool calls, a whole ModelReplied, an exception to raise (such as
# stages.errors.ProviderHTTPError), or a function of the request returning one of those.
Step = str | ToolCalls | ModelReplied | BaseException | Callable[[ModelRequest], Any]


class ScriptedModel:
    """A ``ModelClient`` that answers with its steps in order and records every request."""

    def __init__(self, *steps: Step, usage: Usage | None = None) -> None:
        self._steps: list[Step] = list(steps)
        self.requests: list[ModelRequest] = []
        self.usage = usage or Usage(input_tokens=10, output_tokens=2)
        self._call_ids = itertools.count(1)
        self._unexpected: list[str] = []
        self._lock = threading.Lock()

    def script(self, *steps: Step) -> ScriptedModel:
        """Queue more steps after those left."""
        with self._lock:
            self._steps.extend(steps)
        return self

    @property
    def pending(self) -> int:
        return len(self._steps)

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None,
                 on_reasoning: DeltaSink | None = None) -> ModelReplied:
        del cancel
        with self._lock:
            self.requests.append(request)
            if not self._steps:
                what = f"unexpected model call #{len(self.requests)} ({request.purpose})"
                self._unexpected.append(what)
                raise UnexpectedModelCall(what)
            step = self._steps.pop(0)
        if callable(step) and not isinstance(step, (BaseException, type)):
            step = step(request)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ModelReplied):
            reply = step
        elif isinstance(step, (str, ToolCalls)):
            reply = self._reply(step)
        else:
            raise TypeError(f"a scripted step must be a reply, text, tool calls or an error: "
                            f"{step!r}")
        if on_reasoning is not None and reply.message.reasoning:
            on_reasoning(reply.message.reasoning)
        if on_delta is not None and reply.message.text:
            on_delta(reply.message.text)
        return attrs.evolve(reply, streamed=on_delta is not None)

    def _reply(self, step: str | ToolCalls) -> ModelReplied:
        if isinstance(step, str):
            message = Message(role="assistant", content=step)
        else:
            message = Message(role="assistant", content=step.content, tool_calls=tuple(
                ToolCall(id=f"call_{next(self._call_ids)}", name=name,
                         arguments=args if isinstance(args, str) else json.dumps(args))
                for name, args in step.calls))
        return ModelReplied(message=message, usage=self.usage, model="scripted",
                            finish_reason="tool_calls" if message.tool_calls else "stop",
                            latency_ms=1.0)

    def assert_complete(self) -> None:
        """Fail if a step was never asked for, or a call came with none left."""
        if self._unexpected:
            raise UnexpectedModelCall("; ".join(self._unexpected))
        if self._steps:
            raise AssertionError(f"{len(self._steps)} scripted model step(s) were not asked "
                                 f"for: {self._steps!r}")


class FakeClock:
    """A ``Clock`` that only moves when told to (``advance``) or slept on; ``tick`` seconds are
    added at every reading, so that successive timestamps differ."""

    def __init__(self, start: float = START_EPOCH, *, tick: float = 0.0) -> None:
        self._epoch = start
        self._monotonic = 0.0
        self.tick = tick
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._epoch += seconds
            self._monotonic += seconds

    def _read(self) -> tuple[float, float]:
        self.advance(self.tick)
        with self._lock:
            return self._epoch, self._monotonic

    def now(self) -> str:
        epoch = self._read()[0]
        return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="microseconds")

    def epoch(self) -> float:
        return self._read()[0]

    def monotonic(self) -> float:
        return self._read()[1]

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(max(seconds, 0.0))


class CountingIds:
    """An ``IdSource`` that counts: sessions ``session_0001``, ids ``id0001``; ``fraction``
    (the backoff jitter) is a constant."""

    def __init__(self, *, fraction: float = 0.5, prefix: str = "session") -> None:
        self._sessions = itertools.count(1)
        self._ids = itertools.count(1)
        self._fraction = fraction
        self.prefix = prefix

    def session_id(self) -> str:
        return f"{self.prefix}_{next(self._sessions):04d}"

    def new_id(self) -> str:
        return f"id{next(self._ids):04d}"

    def fraction(self) -> float:
        return self._fraction
