"""Error classification: map a failed model call onto one reason and the recovery actions.

``classify_api_error`` reads a :class:`~stages.events.ModelFailed` (plain data recorded by the
provider adapter) and runs a priority pipeline; the first rule that matches decides:

1. provider-specific patterns: verbatim safety-filter phrases, Anthropic's ``overloaded_error``,
   "credit balance is too low", "prompt is too long", the long-context tier 429 and thinking
   signature 400, and errors an aggregator (OpenRouter) wraps in ``error.metadata.raw``;
2. the HTTP status (400 and unlisted statuses look further);
3. error codes from the body (``error.code``/``error.type``/``error.status``);
4. message patterns (context-window, billing, rate-limit, overload, auth phrases, ...);
5. transport heuristics from ``error_type`` (the adapter's exception class) and
   disconnect phrases;
6. the context-overflow heuristic: a 400 with no specific match on a request estimated above
   90% of the window;
7. the status class (other 4xx: format_error, other 5xx: server_error), then ``unknown``.

The patterns are not gated on ``provider``/``api_mode``: aggregators and compatible endpoints
relay Anthropic's and OpenAI's errors verbatim, and the phrases are specific enough. Both names
go into ``detail``, which the event log keeps. The actions of each reason are fixed by
:data:`ACTIONS`. A failure with ``partial=True`` (part
of a streamed answer already reached the user) is never re-issued: no retry, rotation or
fallback, and ``abort`` is set; the runner decides what to keep of the streamed text.
"""

from __future__ import annotations

import enum
import types

import attrs

from stages.error_text import (
    AUTH,
    AUTH_PERMANENT,
    BILLING,
    CODES,
    CONTENT_POLICY,
    CONTEXT_OVERFLOW,
    FORMAT_TYPES,
    MODEL_NOT_FOUND,
    OVERLOADED,
    PAYLOAD_TOO_LARGE,
    RATE_LIMIT,
    REVOKED,
    TIMEOUT,
    TIMEOUT_TYPES,
    TRANSPORT,
    TRANSPORT_TYPES,
    USAGE_LIMIT,
    USAGE_LIMIT_TRANSIENT,
    ErrorText,
    read_error,
    retry_after_of,
)
from stages.events import ModelFailed

OVERFLOW_HEURISTIC_RATIO = 0.9


class FailureReason(enum.StrEnum):
    """Why a model call failed: a closed set, each with fixed recovery actions."""

    AUTH = "auth"
    AUTH_PERMANENT = "auth_permanent"
    BILLING = "billing"
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    TRANSPORT = "transport"
    CONTEXT_OVERFLOW = "context_overflow"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    MODEL_NOT_FOUND = "model_not_found"
    CONTENT_POLICY_BLOCKED = "content_policy_blocked"
    FORMAT_ERROR = "format_error"
    THINKING_SIGNATURE = "thinking_signature"
    LONG_CONTEXT_TIER = "long_context_tier"
    UNKNOWN = "unknown"


@attrs.frozen(kw_only=True)
class Actions:
    """What may recover from a failure.

    * ``retryable``: the same request on the same key, after a backoff, may succeed.
    * ``rotate_credential``: another key of the same provider may succeed (the pool decides
      whether one is available; a rotation is never counted as a retry).
    * ``compress``: the request is too big; shrinking the context may succeed.
    * ``fallback``: the next fallback provider may succeed. With ``retryable`` the runner falls
      back once retries run out, without it at once.
    * ``abort``: end the turn (after the single fallback attempt when ``fallback`` is set).
    """

    retryable: bool = False
    rotate_credential: bool = False
    compress: bool = False
    fallback: bool = False
    abort: bool = False


R = FailureReason
_TRANSIENT = Actions(retryable=True, fallback=True)
ACTIONS: types.MappingProxyType[FailureReason, Actions] = types.MappingProxyType({
    R.AUTH: Actions(rotate_credential=True, fallback=True),
    # Permanent for this key; another key may belong to another account.
    R.AUTH_PERMANENT: Actions(rotate_credential=True, fallback=True),
    R.BILLING: Actions(rotate_credential=True, fallback=True),
    R.RATE_LIMIT: Actions(retryable=True, rotate_credential=True, fallback=True),
    R.OVERLOADED: _TRANSIENT,
    R.SERVER_ERROR: _TRANSIENT,
    R.TIMEOUT: _TRANSIENT,
    R.TRANSPORT: _TRANSIENT,
    R.CONTEXT_OVERFLOW: Actions(compress=True),
    R.PAYLOAD_TOO_LARGE: Actions(compress=True),
    R.LONG_CONTEXT_TIER: Actions(compress=True),
    R.MODEL_NOT_FOUND: Actions(fallback=True),
    R.CONTENT_POLICY_BLOCKED: Actions(fallback=True, abort=True),
    R.FORMAT_ERROR: _TRANSIENT,
    # The runner strips reasoning signatures from the request, then retries once.
    R.THINKING_SIGNATURE: Actions(retryable=True),
    R.UNKNOWN: _TRANSIENT,
})

_NOT_REISSUED = Actions(abort=True)

STATUS_REASONS: types.MappingProxyType[int, FailureReason] = types.MappingProxyType({
    401: R.AUTH, 402: R.BILLING, 403: R.AUTH_PERMANENT, 404: R.MODEL_NOT_FOUND, 408: R.TIMEOUT,
    413: R.PAYLOAD_TOO_LARGE, 429: R.RATE_LIMIT, 500: R.SERVER_ERROR, 502: R.SERVER_ERROR,
    503: R.OVERLOADED, 504: R.TIMEOUT, 529: R.OVERLOADED,
})
"""The statuses that decide on their own (402, 403 and 429 refine with the body text)."""


@attrs.frozen(kw_only=True)
class ClassifiedError:
    """One failure, classified. ``matched_by`` names the pipeline step that decided."""

    reason: FailureReason
    retryable: bool
    rotate_credential: bool
    compress: bool
    fallback: bool
    abort: bool
    retry_after: float | None = None
    detail: str = ""
    matched_by: str = "default"


_Match = tuple[FailureReason, str, str]  # reason, step, why


def classify_api_error(failure: ModelFailed, *, provider: str, api_mode: str,
                       context_length: int | None = None,
                       estimated_tokens: int = 0) -> ClassifiedError:
    """Classify ``failure``; total: every input maps to exactly one reason, nothing raises."""
    facts = read_error(failure)
    reason, step, why = (
        _by_provider(facts) or _by_status(facts) or _by_codes(facts.codes)
        or _by_message(facts.text) or _by_transport(facts)
        or _by_overflow(facts, context_length, estimated_tokens) or _by_status_class(facts)
        or (R.UNKNOWN, "default", "no rule matched"))
    actions = ACTIONS[reason]
    detail = f"{provider or '?'}/{api_mode or '?'}: {why}"
    if failure.partial:
        actions = _NOT_REISSUED
        detail += "; part of the answer already reached the user, so it is not re-issued"
    return ClassifiedError(reason=reason, detail=detail, matched_by=step,
                           retry_after=retry_after_of(failure.retry_after, facts.text),
                           **attrs.asdict(actions))


def _has(text: str, phrases: tuple[str, ...]) -> str | None:
    return next((p for p in phrases if p in text), None)


# --- the pipeline -----------------------------------------------------------------------------

def _by_provider(f: ErrorText) -> _Match | None:
    if phrase := _has(f.text, CONTENT_POLICY):
        return R.CONTENT_POLICY_BLOCKED, "provider", f"safety filter: {phrase!r}"
    if "overloaded_error" in f.codes or "overloaded_error" in f.inner_codes:
        return R.OVERLOADED, "provider", "anthropic overloaded_error"
    if "credit balance is too low" in f.text:
        return R.BILLING, "provider", "anthropic: credit balance is too low"
    if "prompt is too long" in f.text:
        return R.CONTEXT_OVERFLOW, "provider", "anthropic: prompt is too long"
    if f.status == 429 and "extra usage" in f.text and "long context" in f.text:
        return R.LONG_CONTEXT_TIER, "provider", "anthropic long-context tier requires extra usage"
    if f.status == 400 and "thinking" in f.text and _has(
            f.text, ("signature", "cannot be modified", "must remain as they were")):
        return R.THINKING_SIGNATURE, "provider", "anthropic thinking block rejected"
    if f.inner_codes or f.inner_text:
        inner = _by_codes(f.inner_codes) or _by_message(f.inner_text)
        if inner is not None:
            return inner[0], "provider", f"wrapped upstream error: {inner[2]}"
    return None


def _by_status(f: ErrorText) -> _Match | None:
    reason = STATUS_REASONS.get(f.status) if f.status is not None else None
    if reason is None:
        return None
    why = f"HTTP {f.status}"
    if f.status == 403 and (_has(f.text, BILLING) or "quota" in f.text):
        return R.BILLING, "status", why + " with a billing/quota message"
    if f.status == 402 and _has(f.text, USAGE_LIMIT) and _has(f.text, USAGE_LIMIT_TRANSIENT):
        return R.RATE_LIMIT, "status", why + " with a transient usage-limit message"
    if f.status == 429:
        if "insufficient_quota" in f.codes or _has(f.text, BILLING):
            return R.BILLING, "status", why + " with insufficient_quota or a billing message"
        if _has(f.text, OVERLOADED):
            return R.OVERLOADED, "status", why + " with an overload message"
    if f.status == 401 and _has(f.text, REVOKED):
        return R.AUTH_PERMANENT, "status", why + " with a revoked credential"
    return reason, "status", why


def _by_codes(codes: tuple[str, ...]) -> _Match | None:
    for code in codes:
        reason = CODES.get(code)
        if reason is not None:
            return R(reason), "code", f"error code {code!r}"
    return None


_MESSAGE_GROUPS: tuple[tuple[tuple[str, ...], FailureReason], ...] = (
    (PAYLOAD_TOO_LARGE, R.PAYLOAD_TOO_LARGE),
    (CONTEXT_OVERFLOW, R.CONTEXT_OVERFLOW),
    (BILLING, R.BILLING),
)
_LATER_GROUPS: tuple[tuple[tuple[str, ...], FailureReason], ...] = (
    (OVERLOADED, R.OVERLOADED),
    (RATE_LIMIT, R.RATE_LIMIT),
    (AUTH_PERMANENT, R.AUTH_PERMANENT),
    (AUTH, R.AUTH),
    (MODEL_NOT_FOUND, R.MODEL_NOT_FOUND),
    (TIMEOUT, R.TIMEOUT),
)


def _by_message(text: str) -> _Match | None:
    if not text:
        return None
    for phrases, reason in _MESSAGE_GROUPS:
        if phrase := _has(text, phrases):
            return reason, "message", f"message says {phrase!r}"
    if phrase := _has(text, USAGE_LIMIT):
        transient = _has(text, USAGE_LIMIT_TRANSIENT)
        return ((R.RATE_LIMIT if transient else R.BILLING), "message",
                f"message says {phrase!r}" + (f" and {transient!r}" if transient else ""))
    for phrases, reason in _LATER_GROUPS:
        if phrase := _has(text, phrases):
            return reason, "message", f"message says {phrase!r}"
    if "does not exist" in text and "model" in text:
        return R.MODEL_NOT_FOUND, "message", "message says the model does not exist"
    return None


def _by_transport(f: ErrorText) -> _Match | None:
    if f.error_type in TIMEOUT_TYPES:
        return R.TIMEOUT, "transport", f"error type {f.error_type}"
    if f.error_type in TRANSPORT_TYPES:
        return R.TRANSPORT, "transport", f"error type {f.error_type}"
    if f.error_type in FORMAT_TYPES:
        return R.FORMAT_ERROR, "transport", f"error type {f.error_type}"
    if f.status is None and (phrase := _has(f.text, TRANSPORT)):
        return R.TRANSPORT, "transport", f"message says {phrase!r}"
    return None


def _by_overflow(f: ErrorText, context_length: int | None, estimated: int) -> _Match | None:
    if f.status != 400 or not context_length or context_length <= 0:
        return None
    if estimated > OVERFLOW_HEURISTIC_RATIO * context_length:
        return (R.CONTEXT_OVERFLOW, "heuristic",
                f"HTTP 400 on a request of ~{estimated} tokens, window {context_length}")
    return None


def _by_status_class(f: ErrorText) -> _Match | None:
    if f.status is not None and 400 <= f.status < 500:
        return R.FORMAT_ERROR, "status_class", f"HTTP {f.status}"
    if f.status is not None and 500 <= f.status < 600:
        return R.SERVER_ERROR, "status_class", f"HTTP {f.status}"
    return None
