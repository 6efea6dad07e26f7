"""The reasons a model call fails, and the two generic matchers: by body code and by message.

``stages.recovery.classify`` runs the whole pipeline; this module holds what its rule modules share.
"""

from __future__ import annotations

import enum

from stages.recovery import phrases as ph

__all__ = ["FailureReason", "Match", "has", "matched_code", "matched_message"]


class FailureReason(enum.StrEnum):
    """Why a model call failed: a closed set, each with fixed recovery actions."""

    AUTH = "auth"
    AUTH_PERMANENT = "auth_permanent"
    ACCOUNT_BLOCKED = "account_blocked"
    BILLING = "billing"
    RATE_LIMIT = "rate_limit"
    UPSTREAM_RATE_LIMIT = "upstream_rate_limit"
    OVERLOADED = "overloaded"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    TRANSPORT = "transport"
    CONTEXT_OVERFLOW = "context_overflow"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    OUTPUT_CAP = "output_cap"
    IMAGE_TOO_LARGE = "image_too_large"
    MODEL_NOT_FOUND = "model_not_found"
    ENDPOINT_ERROR = "endpoint_error"
    CONTENT_POLICY_BLOCKED = "content_policy_blocked"
    FORMAT_ERROR = "format_error"
    THINKING_SIGNATURE = "thinking_signature"
    INVALID_ENCRYPTED_CONTENT = "invalid_encrypted_content"
    LONG_CONTEXT_TIER = "long_context_tier"
    LONG_CONTEXT_BETA_FORBIDDEN = "long_context_beta_forbidden"
    UNKNOWN = "unknown"


R = FailureReason
Match = tuple[FailureReason, str, str]  # reason, step, why


def has(text: str, phrases: tuple[str, ...]) -> str | None:
    """The first of ``phrases`` that occurs in ``text``."""
    return next((p for p in phrases if p in text), None)


def matched_code(codes: tuple[str, ...]) -> Match | None:
    for code in codes:
        reason = ph.CODES.get(code)
        if reason is not None:
            return R(reason), "code", f"error code {code!r}"
    return None


_MESSAGE_GROUPS: tuple[tuple[tuple[str, ...], FailureReason], ...] = (
    (ph.PAYLOAD_TOO_LARGE, R.PAYLOAD_TOO_LARGE),
    (ph.CONTEXT_OVERFLOW, R.CONTEXT_OVERFLOW),
    (ph.BILLING, R.BILLING),
)
_LATER_GROUPS: tuple[tuple[tuple[str, ...], FailureReason], ...] = (
    (ph.OVERLOADED, R.OVERLOADED),
    (ph.RATE_LIMIT, R.RATE_LIMIT),
    (ph.AUTH_PERMANENT, R.AUTH_PERMANENT),
    (ph.AUTH, R.AUTH),
    (ph.MODEL_NOT_FOUND, R.MODEL_NOT_FOUND),
    (ph.TIMEOUT, R.TIMEOUT),
)


def matched_message(text: str) -> Match | None:
    if not text:
        return None
    for phrases, reason in _MESSAGE_GROUPS:
        if phrase := has(text, phrases):
            return reason, "message", f"message says {phrase!r}"
    if phrase := has(text, ph.USAGE_LIMIT):
        transient = has(text, ph.USAGE_LIMIT_TRANSIENT)
        return ((R.RATE_LIMIT if transient else R.BILLING), "message",
                f"message says {phrase!r}" + (f" and {transient!r}" if transient else ""))
    for phrases, reason in _LATER_GROUPS:
        if phrase := has(text, phrases):
            return reason, "message", f"message says {phrase!r}"
    if "does not exist" in text and "model" in text:
        return R.MODEL_NOT_FOUND, "message", "message says the model does not exist"
    return None
