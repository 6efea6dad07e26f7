"""Error classification: map a failed model call onto one reason and the recovery actions.

``classify_api_error`` reads a :class:`~stages.log.events.ModelFailed` (plain data recorded by the
provider adapter; any field may hold an unexpected type, the body any shape) and runs a
priority pipeline; the first rule that matches decides:

1. provider wordings that decide whatever the status (``stages.recovery.provider_rules``): safety
   filters, Anthropic's overloaded/credit/overflow/long-context/thinking errors, output caps,
   oversized images, unreadable encrypted reasoning, a refused long-context beta, an account
   refused for its region, network or a disabled API, a per-minute request too large, Gemini's
   free-tier quotas, LiteLLM's budget and cooldown;
2. an error an aggregator (OpenRouter) wraps from its upstream provider: a rate limit there is
   not one on our key, so it is retried or falls back but does not rotate the key;
3. the HTTP status (400 and unlisted statuses look further; 402, 403, 404, 429 and 5xx refine
   with the body);
4. error codes from the body (``error.code``/``type``/``status``, Google's ``reason``);
5. message patterns (context-window, billing, rate-limit, overload, auth phrases, ...);
6. transport heuristics from ``error_type`` (the adapter's exception class) and
   disconnect phrases;
7. the size heuristic: a bare error (nothing specific said) on a request estimated near or over
   the window is an overflow (a 400 or a disconnect above 90% of it, a 500 at or above it);
8. the status class (other 4xx: format_error, retried only when the body says to try again;
   other 5xx: server_error), then ``unknown``.

The patterns are not gated on ``provider``/``api_mode``: aggregators and compatible endpoints
relay Anthropic's and OpenAI's errors verbatim, and the phrases are specific enough. Both names
go into ``detail``, which the event log keeps. The actions of each reason are fixed by
:data:`ACTIONS`. A failure with ``partial=True`` (part of a streamed answer already reached
the user) is never re-issued: no retry, rotation or fallback, and ``abort`` is set; the runner
decides what to keep of the streamed text.
"""

from __future__ import annotations

import types

import attrs

from stages.log.events import ModelFailed
from stages.recovery import phrases as ph
from stages.recovery.backoff import retry_after_of
from stages.recovery.error_text import ErrorText, output_limit_of, read_error
from stages.recovery.provider_rules import by_provider, by_upstream
from stages.recovery.reasons import FailureReason, Match, has, matched_code, matched_message

__all__ = ["ACTIONS", "STATUS_REASONS", "Actions", "ClassifiedError", "FailureReason",
           "classify_api_error"]

OVERFLOW_HEURISTIC_RATIO = 0.9


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
    # The upstream provider's shared limit: our key is not the matter.
    R.UPSTREAM_RATE_LIMIT: _TRANSIENT,
    R.OVERLOADED: _TRANSIENT,
    R.SERVER_ERROR: _TRANSIENT,
    R.TIMEOUT: _TRANSIENT,
    R.TRANSPORT: _TRANSIENT,
    R.CONTEXT_OVERFLOW: Actions(compress=True),
    R.PAYLOAD_TOO_LARGE: Actions(compress=True),
    R.LONG_CONTEXT_TIER: Actions(compress=True),
    # The runner drops the long-context beta (the window becomes 200k) and compresses.
    R.LONG_CONTEXT_BETA_FORBIDDEN: Actions(compress=True),
    # Resent as is it fails again: the runner lowers max_tokens (``output_limit``) or falls back.
    R.OUTPUT_CAP: Actions(fallback=True),
    R.IMAGE_TOO_LARGE: Actions(fallback=True),
    R.MODEL_NOT_FOUND: Actions(fallback=True),
    # The URL or deployment is wrong: a configuration error another provider may not have.
    R.ENDPOINT_ERROR: Actions(fallback=True),
    # Region, network or a disabled API: binds every key of the account.
    R.ACCOUNT_BLOCKED: Actions(fallback=True),
    R.CONTENT_POLICY_BLOCKED: Actions(fallback=True, abort=True),
    R.FORMAT_ERROR: Actions(fallback=True),
    # The runner strips reasoning signatures from the request, then retries once.
    R.THINKING_SIGNATURE: Actions(retryable=True),
    # The runner stops replaying encrypted reasoning items, then retries once.
    R.INVALID_ENCRYPTED_CONTENT: Actions(retryable=True),
    R.UNKNOWN: _TRANSIENT,
})

_NOT_REISSUED = Actions(abort=True)

STATUS_REASONS: types.MappingProxyType[int, FailureReason] = types.MappingProxyType({
    401: R.AUTH, 402: R.BILLING, 403: R.AUTH_PERMANENT, 404: R.MODEL_NOT_FOUND,
    405: R.ENDPOINT_ERROR, 408: R.TIMEOUT, 413: R.PAYLOAD_TOO_LARGE, 429: R.RATE_LIMIT,
    500: R.SERVER_ERROR, 501: R.ENDPOINT_ERROR, 502: R.SERVER_ERROR, 503: R.OVERLOADED,
    504: R.TIMEOUT,
    529: R.OVERLOADED,
})
"""The statuses that decide on their own (402, 403, 404, 429 and 5xx refine with the body)."""


@attrs.frozen(kw_only=True)
class ClassifiedError:
    """One failure, classified. ``matched_by`` names the pipeline step that decided;
    ``output_limit`` is the largest ``max_tokens`` the error says would have fitted."""

    reason: FailureReason
    retryable: bool
    rotate_credential: bool
    compress: bool
    fallback: bool
    abort: bool
    retry_after: float | None = None
    detail: str = ""
    matched_by: str = "default"
    output_limit: int | None = None


def classify_api_error(failure: ModelFailed, *, provider: str, api_mode: str,
                       context_length: int | None = None,
                       estimated_tokens: int = 0) -> ClassifiedError:
    """Classify ``failure``; total: every input maps to exactly one reason, nothing raises."""
    facts = read_error(failure)
    reason, step, why = (
        by_provider(facts) or by_upstream(facts)
        or _by_size(facts, context_length, estimated_tokens, first=True)
        or _by_status(facts) or matched_code(facts.codes) or matched_message(facts.text)
        or _by_transport(facts) or _by_size(facts, context_length, estimated_tokens)
        or _by_status_class(facts) or (R.UNKNOWN, "default", "no rule matched"))
    actions = ACTIONS[reason]
    detail = f"{_name(provider)}/{_name(api_mode)}: {why}"
    if getattr(failure, "partial", False) is True:
        actions = _NOT_REISSUED
        detail += "; part of the answer already reached the user, so it is not re-issued"
    return ClassifiedError(
        reason=reason, detail=detail, matched_by=step, output_limit=output_limit_of(facts.text),
        retry_after=retry_after_of(getattr(failure, "retry_after", None), facts.text,
                                   facts.retry_hint),
        **attrs.asdict(actions))


def _name(value: object) -> str:
    return value[:100] if isinstance(value, str) and value else "?"


# --- the generic steps of the pipeline --------------------------------------------------------

def _by_status(f: ErrorText) -> Match | None:
    status = f.status
    reason = STATUS_REASONS.get(status) if status is not None else None
    if reason is None or status is None:
        return None
    why = f"HTTP {f.status}"
    if f.status == 403 and (has(f.text, ph.BILLING) or "quota" in f.text):
        return R.BILLING, "status", why + " with a billing/quota message"
    if f.status == 402 and has(f.text, ph.USAGE_LIMIT) and has(f.text, ph.USAGE_LIMIT_TRANSIENT):
        return R.RATE_LIMIT, "status", why + " with a transient usage-limit message"
    if f.status == 429:
        if any(ph.CODES.get(c) == "billing" for c in f.codes) or has(f.text, ph.BILLING):
            return R.BILLING, "status", why + " with a billing code or message"
        if has(f.text, ph.OVERLOADED):
            return R.OVERLOADED, "status", why + " with an overload message"
    if f.status == 401 and has(f.text, ph.REVOKED):
        return R.AUTH_PERMANENT, "status", why + " with a revoked credential"
    if f.status == 404:
        return _not_found(f)
    if status >= 500 and (phrase := has(f.text, ph.CONTEXT_OVERFLOW)):
        return R.CONTEXT_OVERFLOW, "status", f"{why} whose message says {phrase!r}"
    if status >= 500 and (phrase := has(f.text, ph.REQUEST_INVALID)):
        return R.FORMAT_ERROR, "status", f"{why} refusing the request itself: {phrase!r}"
    return reason, "status", why


# Codes that name a missing model (a bare "not_found" names no model).
_MODEL_CODES = frozenset(code for code, reason in ph.CODES.items()
                         if reason == "model_not_found") - {"not_found_error", "not_found"}


def _not_found(f: ErrorText) -> Match:
    """A 404 is a missing model only when it names one; else the URL or path is wrong."""
    if code := next((c for c in f.codes if c in _MODEL_CODES), None):
        return R.MODEL_NOT_FOUND, "status", f"HTTP 404 with error code {code!r}"
    if phrase := has(f.text, ph.MODEL_NOT_FOUND):
        return R.MODEL_NOT_FOUND, "status", f"HTTP 404, message says {phrase!r}"
    if "model" in f.text and not has(f.text, ph.WRONG_ENDPOINT):
        return R.MODEL_NOT_FOUND, "status", "HTTP 404 naming a model"
    return R.ENDPOINT_ERROR, "status", "HTTP 404 naming no model: the URL or path is wrong"


def _by_transport(f: ErrorText) -> Match | None:
    if f.error_type in ph.TIMEOUT_TYPES:
        return R.TIMEOUT, "transport", f"error type {f.error_type}"
    if f.error_type in ph.TRANSPORT_TYPES:
        return R.TRANSPORT, "transport", f"error type {f.error_type}"
    if f.error_type in ph.FORMAT_TYPES:
        return R.SERVER_ERROR, "transport", f"unusable reply (error type {f.error_type})"
    if f.status is None and (phrase := has(f.text, ph.TRANSPORT)):
        return R.TRANSPORT, "transport", f"message says {phrase!r}"
    return None


def _by_size(f: ErrorText, context_length: object, estimated: object, *,
             first: bool = False) -> Match | None:
    """A bare error on a request near or over the window is an overflow. ``first``: the
    500 and disconnect cases, tried before the status decides."""
    if not isinstance(context_length, int) or context_length <= 0:
        return None
    if not isinstance(estimated, (int, float)) or isinstance(estimated, bool):
        return None
    if f.status == 400 and not first:
        limit = OVERFLOW_HEURISTIC_RATIO * context_length
    elif first and f.status == 500 and _bare(f):
        limit = float(context_length)
    elif first and f.status is None and has(f.text, ph.TRANSPORT) and _bare(f):
        limit = OVERFLOW_HEURISTIC_RATIO * context_length
    else:
        return None
    if estimated < limit:
        return None
    why = f"bare error (HTTP {f.status}) on ~{estimated} tokens, window {context_length}"
    return R.CONTEXT_OVERFLOW, "heuristic", why


def _bare(f: ErrorText) -> bool:
    """Nothing specific said: no code or message that names a cause other than a server or
    transport fault."""
    said = matched_code(f.codes) or matched_message(f.text)
    return said is None or said[0] in (R.SERVER_ERROR, R.TIMEOUT, R.OVERLOADED)


def _by_status_class(f: ErrorText) -> Match | None:
    if f.status is not None and 400 <= f.status < 500:
        if phrase := has(f.text, ph.RETRY_ADVICE):
            return R.UNKNOWN, "status_class", f"HTTP {f.status} whose message says {phrase!r}"
        return R.FORMAT_ERROR, "status_class", f"HTTP {f.status}: the request was refused as is"
    if f.status is not None and 500 <= f.status < 600:
        return R.SERVER_ERROR, "status_class", f"HTTP {f.status}"
    return None
