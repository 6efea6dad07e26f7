"""What a provider error says: its codes and text, and the tables ``stages.classify`` matches.

:func:`read_error` normalises a :class:`~stages.events.ModelFailed`: the codes (the adapter's
``code``, then the body's ``error.code``/``error.type``/``error.status`` and top-level ones) and
the text (the adapter's message, the body's ``message``/``detail`` fields, and the upstream error
an aggregator such as OpenRouter wraps in ``error.metadata.raw``, which is also kept apart).

Phrases are matched as lower-case substrings of that text. They are verbatim fragments of real
provider errors, kept narrow so one group does not swallow another; the order in which the
groups are tried is decided in ``stages.classify``.
"""

from __future__ import annotations

import json
import math
import re
import types

import attrs

from stages.events import ModelFailed

_MAX_TEXT = 20_000
_MAX_BODY = 200_000

# Per-prompt safety decisions (OpenAI moderation and Codex cyber filter, Anthropic safety).
CONTENT_POLICY: tuple[str, ...] = (
    "flagged for possible cybersecurity risk", "trusted access for cyber",
    "violates our usage policies", "violates openai's usage policies",
    "your request was flagged by", "rejected as a result of our safety system",
    "prompt was flagged by our safety", "responses cannot be generated due to safety",
)

PAYLOAD_TOO_LARGE: tuple[str, ...] = (
    "request entity too large", "payload too large", "error code: 413", "request_too_large",
)

# Context-window phrases of OpenAI, Anthropic, llama.cpp, vLLM, Ollama, Bedrock and others.
CONTEXT_OVERFLOW: tuple[str, ...] = (
    "maximum context length", "context length", "context_length_exceeded", "context window",
    "context size", "exceeds the available context size", "prompt is too long",
    "prompt exceeds max length", "too many tokens", "reduce the length",
    "maximum number of tokens", "exceeds the max_model_len", "max_model_len",
    "maximum model length", "input is too long", "truncating input", "slot context",
    "n_ctx_slot", "exceeds the maximum number of input tokens", "max input token",
    "token limit", "超过最大长度", "上下文长度",
)

# Credit or quota exhaustion: does not resolve by waiting a few seconds.
BILLING: tuple[str, ...] = (
    "insufficient credits", "insufficient_quota", "insufficient balance", "credit balance",
    "credits exhausted", "credits have been exhausted", "no usable credits",
    "top up your credits", "payment required", "billing hard limit",
    "exceeded your current quota", "check your plan and billing", "account is deactivated",
    "plan does not include", "out of funds", "balance_depleted",
    "not available on the free tier",
)

# Ambiguous usage-limit wording, disambiguated by a transient signal (rate limit) or not.
USAGE_LIMIT: tuple[str, ...] = ("usage limit", "quota", "limit exceeded")
USAGE_LIMIT_TRANSIENT: tuple[str, ...] = (
    "try again", "retry", "resets at", "resets in", "reset at", "reset in", "wait",
    "requests remaining", "periodic", "window", "per minute", "per day",
)

RATE_LIMIT: tuple[str, ...] = (
    "rate limit", "rate_limit", "ratelimit", "rate-limited", "too many requests", "throttled",
    "throttling", "requests per minute", "tokens per minute", "requests per day",
    "try again in", "please retry after", "resource_exhausted", "resource exhausted",
    "rate increased too quickly", "too many concurrent requests",
)

OVERLOADED: tuple[str, ...] = (
    "overloaded", "at capacity", "over capacity", "service unavailable",
    "temporarily unavailable", "no capacity",
)

# An OAuth credential that is gone for good: refreshing it will not help.
REVOKED: tuple[str, ...] = (
    "token_revoked", "token revoked", "token_invalidated", "invalid_grant",
    "refresh_token_reused", "unauthorized_client",
)

# Revoked or forbidden: this key may not do this.
AUTH_PERMANENT: tuple[str, ...] = REVOKED + (
    "permission denied", "permission_denied", "access denied", "forbidden",
    "not allowed to access",
)

AUTH: tuple[str, ...] = (
    "invalid api key", "invalid_api_key", "incorrect api key", "invalid x-api-key",
    "api key not valid", "no api key", "missing api key", "authentication", "unauthorized",
    "invalid token", "token expired", "expired token", "invalid bearer",
)

MODEL_NOT_FOUND: tuple[str, ...] = (
    "model not found", "model_not_found", "is not a valid model", "invalid model",
    "no such model", "unknown model", "unsupported model", "no endpoints found",
    "no endpoints available",
)

TIMEOUT: tuple[str, ...] = (
    "timed out", "timeout", "deadline exceeded", "time out", "took too long",
)

# Disconnects and network failures reported without an HTTP status.
TRANSPORT: tuple[str, ...] = (
    "connection reset", "connection refused", "connection aborted", "connection error",
    "connection was closed", "connection lost", "server disconnected", "remote end closed",
    "remoteprotocolerror", "peer closed connection", "broken pipe", "incomplete chunked read",
    "unexpected eof", "eof occurred", "stream ended", "stream was cut", "network is unreachable",
    "name or service not known", "temporary failure in name resolution", "bad record mac",
    "ssl alert", "tls alert", "[ssl:",
)

# Exception class names (the last dotted segment, lower-cased) the adapters may record.
TIMEOUT_TYPES: frozenset[str] = frozenset({
    "providertimeouterror", "timeouterror", "timeout", "readtimeout", "connecttimeout",
    "pooltimeout", "writetimeout", "apitimeouterror", "timeoutexception",
})
TRANSPORT_TYPES: frozenset[str] = frozenset({
    "providerunavailableerror", "connectionerror", "connecterror", "remoteprotocolerror",
    "apiconnectionerror", "readerror", "writeerror", "networkerror", "transporterror",
    "oserror", "brokenpipeerror", "connectionreseterror", "connectionrefusederror",
    "connectionabortederror", "incompleteread", "serverdisconnectederror", "sslerror",
    "ssleoferror", "sslzeroreturnerror", "protocolerror",
})
FORMAT_TYPES: frozenset[str] = frozenset({
    "modelbehaviourerror", "jsondecodeerror", "validationerror", "decodingerror",
})

# Body error codes (``error.code``, ``error.type``, ``error.status``), lower-cased, to the
# value of a ``FailureReason``. Generic types such as ``invalid_request_error`` are absent on
# purpose: they say nothing about the cause.
CODES: types.MappingProxyType[str, str] = types.MappingProxyType({
    **dict.fromkeys(("context_length_exceeded", "exceed_context_size_error",
                     "context_window_exceeded", "max_tokens_exceeded",
                     "string_above_max_length", "prompt_too_long"), "context_overflow"),
    **dict.fromkeys(("request_too_large", "payload_too_large"), "payload_too_large"),
    **dict.fromkeys(("rate_limit_exceeded", "rate_limit_error", "rate_limited",
                     "resource_exhausted", "throttled", "throttlingexception",
                     "too_many_requests", "usage_limit_reached", "tokens_exceeded",
                     "requests_exceeded"), "rate_limit"),
    **dict.fromkeys(("insufficient_quota", "billing_hard_limit_reached", "billing_not_active",
                     "insufficient_credits", "insufficient_balance", "payment_required",
                     "balance_depleted", "credits_exhausted", "account_deactivated"), "billing"),
    **dict.fromkeys(("invalid_api_key", "authentication_error", "invalid_authentication",
                     "unauthenticated", "unauthorized", "token_expired", "expired_token",
                     "missing_api_key"), "auth"),
    **dict.fromkeys(("permission_error", "permission_denied", "forbidden", "token_revoked",
                     "invalid_grant"), "auth_permanent"),
    **dict.fromkeys(("model_not_found", "not_found_error", "model_not_available",
                     "unknown_model", "invalid_model", "deployment_not_found",
                     "not_found"), "model_not_found"),
    **dict.fromkeys(("content_filter", "content_policy_violation", "content_policy",
                     "responsibleaipolicyviolation", "moderation_blocked", "safety",
                     "invalid_prompt"), "content_policy_blocked"),
    **dict.fromkeys(("overloaded_error", "overloaded", "server_overloaded", "unavailable",
                     "service_unavailable", "engine_overloaded"), "overloaded"),
    **dict.fromkeys(("api_error", "server_error", "internal_error", "internal_server_error",
                     "internal"), "server_error"),
    **dict.fromkeys(("timeout", "request_timeout", "deadline_exceeded", "gateway_timeout"),
                    "timeout"),
    **dict.fromkeys(("unknown_parameter", "unsupported_parameter", "invalid_value",
                     "invalid_type", "invalid_json", "unsupported_value"), "format_error"),
})


# --- reading an error ------------------------------------------------------------------------

@attrs.frozen(kw_only=True)
class ErrorText:
    """What a failure says, normalised: codes and text lower-cased, bounded in size."""

    status: int | None
    codes: tuple[str, ...]
    text: str
    inner_codes: tuple[str, ...]
    inner_text: str
    error_type: str


def read_error(failure: ModelFailed) -> ErrorText:
    """Collect the codes and text of ``failure``; never raises."""
    codes, messages, raw = _parse_body(failure.body)
    inner_codes, inner_messages, _ = _parse_body(raw) if raw else ((), (), None)
    own = (failure.code.strip().lower(),) if failure.code and failure.code.strip() else ()
    inner_text = _join(inner_messages)
    return ErrorText(
        status=failure.status, codes=own + codes,
        text=_join((failure.message or "", *messages, inner_text)),
        inner_codes=inner_codes, inner_text=inner_text,
        error_type=(failure.error_type or "").rsplit(".", 1)[-1].strip().lower())


def _join(parts: tuple[str, ...] | list[str]) -> str:
    return " | ".join(p for p in parts if p).lower()[:_MAX_TEXT]


def _parse_body(body: str | None) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """``(codes, messages, wrapped raw error)`` from an error body; non-JSON is one message."""
    if not body:
        return (), (), None
    try:
        data = json.loads(body[:_MAX_BODY])
    except (ValueError, RecursionError):
        return (), (body[:_MAX_TEXT],), None
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        return (), (body[:_MAX_TEXT],), None
    codes: list[str] = []
    messages: list[str] = []
    raw: str | None = None
    error = data.get("error")
    if isinstance(error, str):
        messages.append(error)
    elif isinstance(error, dict):
        _collect(error, codes, messages)
        raw = _wrapped(error.get("metadata"))
    _collect(data, codes, messages)
    return tuple(codes), tuple(messages), raw


def _collect(obj: dict, codes: list[str], messages: list[str]) -> None:
    for key in ("code", "type", "status"):
        value = obj.get(key)
        if isinstance(value, str) and value.strip() and value != "error":
            codes.append(value.strip().lower())
    for key in ("message", "detail", "error_description"):
        value = obj.get(key)
        if isinstance(value, str):
            messages.append(value)


def _wrapped(metadata: object) -> str | None:
    """OpenRouter puts the upstream provider's error in ``error.metadata.raw``."""
    if not isinstance(metadata, dict):
        return None
    raw = metadata.get("raw")
    if isinstance(raw, str) and raw.strip():
        return raw
    if isinstance(raw, dict):
        return json.dumps(raw)
    return None


_RETRY_IN = re.compile(
    r"(?:try again in|retry after|retry in|retry-after:?)\s*(\d{1,7}(?:\.\d{1,6})?)\s*"
    r"(ms|milliseconds?|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)?(?![a-z])")


def retry_after_of(given: float | None, text: str) -> float | None:
    """The adapter's Retry-After, else a delay the message names ("try again in 20s")."""
    if given is not None and math.isfinite(given) and given >= 0:
        return float(given)
    found = _RETRY_IN.search(text)
    if found is None:
        return None
    unit = found.group(2) or "s"
    scale = (0.001 if unit.startswith(("ms", "milli")) else 60.0 if unit.startswith("m")
             else 3600.0 if unit.startswith("h") else 1.0)
    return float(found.group(1)) * scale
