"""A session's events as OpenTelemetry spans in the GenAI semantic conventions: one
``invoke_agent`` span per turn, a ``chat {model}`` span per model call and an
``execute_tool {name}`` span per tool call under it.

``SpanPlan`` reads the events one at a time, with the time each was recorded, and says which
span opens or closes then; the live exporter (``pipeline.telemetry.live``) turns that into SDK
spans as the turn runs, ``mibyan traces`` (``pipeline.telemetry.otlp``) into OTLP JSON from a
log, with the log's timestamps. Only names, ids, counts and error classes become attributes,
never message or tool text, and every string is redacted as the log redacts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from stages.log import events as ev
from stages.log.redact import redact

# The attribute names of the conventions (opentelemetry-semantic-conventions'
# gen_ai_attributes; tests/pipeline/test_telemetry.py checks them against the package).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
CONVERSATION = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
ERROR_TYPE = "error.type"

Attributes = dict[str, str | int | tuple[str, ...]]


@attrs.frozen
class Opened:
    """A span starts at ``at`` (seconds since the epoch). ``key`` names it among the session's
    spans, ``parent`` its parent's key; ``client``: a call out of the process."""

    key: str
    name: str
    parent: str | None
    at: float
    attributes: Attributes
    client: bool = False


@attrs.frozen
class Closed:
    """The span ``key`` ends at ``at``, with these attributes added; ``error`` is its
    ``error.type`` when it failed."""

    key: str
    at: float
    attributes: Attributes
    error: str | None = None


Change = Opened | Closed


def _provider(name: str) -> str:
    """The conventions' name of a provider (a custom value where they have none)."""
    return {"openai": "openai", "anthropic": "anthropic", "deepseek": "deepseek",
            "groq": "groq", "mistral": "mistral_ai", "xai": "x_ai",
            "gemini": "gcp.gemini"}.get(name, name)


def _input_tokens(usage: ev.Usage) -> int:
    """The conventions count cached input in the input tokens; mibyan's usage keeps them
    apart."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


class SpanPlan:
    """Which spans open and close as a session's events come; ``known`` are the secrets to
    redact besides the shapes of secrets."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self._known = known
        self._settings: ev.SessionSettings | None = None
        self._turns = 0
        self._calls = 0
        self._turn: str | None = None
        self._call: str | None = None
        self._usage = ev.Usage()
        self._answered_by: str | None = None

    def feed(self, event: ev.Event, at: float, session_id: str) -> list[Change]:
        """The spans ``event``, recorded at ``at`` in session ``session_id``, opens or
        closes."""
        if isinstance(event, ev.SessionStarted | ev.SessionResumed):
            self._settings = event.settings
        elif isinstance(event, ev.TurnStarted):
            return self._start_turn(at, session_id)
        elif self._turn is None:
            return []  # a log that starts inside a turn (a fork's prefix was not traced)
        elif isinstance(event, ev.ModelRequested):
            return self._start_call(event, at, session_id)
        elif isinstance(event, ev.ModelReplied | ev.ModelFailed):
            return self._end_call(event, at)
        elif isinstance(event, ev.Interrupted) and self._call is not None:
            return self._end_call(None, at, error="interrupted")
        elif isinstance(event, ev.ToolRan):
            return self._tool(event.outcome, at, session_id)
        elif isinstance(event, ev.TurnFinished | ev.TurnAborted):
            return self._end_turn(event, at)
        return []

    def _clean(self, attributes: dict[str, Any]) -> Attributes:
        """Redacted strings, and no attribute without a value."""
        return {k: (redact(v, self._known) if isinstance(v, str) else v)
                for k, v in attributes.items() if v is not None}

    def _start_turn(self, at: float, session_id: str) -> list[Change]:
        changes: list[Change] = []
        if self._turn is not None:  # a turn a crash left open: closed where the next begins
            changes.append(Closed(self._turn, at, {}, error="abandoned"))
        self._turns += 1
        self._turn, self._call = f"turn-{self._turns}", None
        self._usage, self._answered_by = ev.Usage(), None
        entry = self._settings.chain[0] if self._settings is not None else None
        changes.append(Opened(self._turn, "invoke_agent mibyan", None, at, self._clean({
            OPERATION: "invoke_agent", AGENT_NAME: "mibyan", CONVERSATION: session_id,
            PROVIDER: None if entry is None else _provider(entry.provider),
            REQUEST_MODEL: None if entry is None else entry.model})))
        return changes

    def _start_call(self, event: ev.ModelRequested, at: float,
                    session_id: str) -> list[Change]:
        self._calls += 1
        self._call = f"chat-{self._calls}"
        return [Opened(self._call, f"chat {event.model}", self._turn, at, self._clean({
            OPERATION: "chat", PROVIDER: _provider(event.provider),
            REQUEST_MODEL: event.model, CONVERSATION: session_id}), client=True)]

    def _end_call(self, event: ev.ModelReplied | ev.ModelFailed | None, at: float, *,
                  error: str | None = None) -> list[Change]:
        if self._call is None:
            return []
        key, self._call = self._call, None
        if isinstance(event, ev.ModelFailed):
            return [Closed(key, at, {}, error=redact(event.error_type, self._known))]
        if event is None:
            return [Closed(key, at, {}, error=error)]
        usage = event.usage
        self._usage = self._usage + usage
        self._answered_by = event.model
        return [Closed(key, at, self._clean({
            RESPONSE_MODEL: event.model, FINISH_REASONS: (event.finish_reason,),
            INPUT_TOKENS: _input_tokens(usage), OUTPUT_TOKENS: usage.output_tokens,
            CACHE_READ: usage.cache_read_tokens, CACHE_WRITE: usage.cache_write_tokens}))]

    def _tool(self, outcome: Any, at: float, session_id: str) -> list[Change]:
        key = f"tool-{outcome.call_id}-{self._calls}"
        start = at - max(outcome.duration_ms, 0.0) / 1000
        return [Opened(key, f"execute_tool {outcome.name}", self._turn, start, self._clean({
                    OPERATION: "execute_tool", TOOL_NAME: outcome.name,
                    TOOL_CALL_ID: outcome.call_id, TOOL_TYPE: "function",
                    CONVERSATION: session_id})),
                Closed(key, at, {}, error=None if outcome.ok else "tool_error")]

    def _end_turn(self, event: ev.TurnFinished | ev.TurnAborted, at: float) -> list[Change]:
        assert self._turn is not None
        changes: list[Change] = []
        if self._call is not None:
            changes += self._end_call(None, at, error="aborted")
        key, self._turn = self._turn, None
        error = None
        if isinstance(event, ev.TurnAborted):
            error = "aborted"
        elif event.failed:
            error = event.exit_reason.partition("(")[0] or "failed"
        changes.append(Closed(key, at, self._clean({
            RESPONSE_MODEL: self._answered_by,
            INPUT_TOKENS: _input_tokens(self._usage), OUTPUT_TOKENS: self._usage.output_tokens}),
            error=error))
        return changes
