"""The provider-specific rules of the classifier: wordings that decide whatever the status.

Each rule is a verbatim provider wording (see ``tests/corpus/errors/`` for the bodies) whose
meaning the status alone gets wrong: Anthropic answers an overflow, a credit shortage and
"out of extra usage" with a 400, llama.cpp an overflow with a 500, Gemini its per-minute
free-tier limit with "check your plan and billing", OpenAI a request over its per-minute
token budget with a 429 that no wait can pass, and a 403 for a region, network or disabled API
binds the whole account, not the key.
"""

from __future__ import annotations

from stages.recovery import phrases as ph
from stages.recovery.error_text import ErrorText
from stages.recovery.reasons import FailureReason, Match, has, matched_code, matched_message

__all__ = ["by_provider", "by_upstream"]

R = FailureReason


def by_provider(f: ErrorText) -> Match | None:
    """The first provider wording that decides, in the order of :data:`_RULES`."""
    for rule in _RULES:
        found = rule(f)
        if found is not None:
            return found[0], "provider", found[1]
    return None


def by_upstream(f: ErrorText) -> Match | None:
    """An error an aggregator (OpenRouter) relays from its upstream provider. A rate limit
    there is the upstream's shared limit, not one on our key: rotating our key cannot help."""
    if not (f.upstream or f.inner_codes or f.inner_text):
        return None
    where = f"upstream {f.upstream!r}" if f.upstream else "wrapped upstream error"
    inner = ErrorText(status=None, codes=f.inner_codes, text=f.inner_text, inner_codes=(),
                      inner_text="", error_type="")
    found = by_provider(inner) or matched_code(f.inner_codes) or matched_message(f.inner_text)
    if found is None:
        if f.upstream and f.status == 429:
            return R.UPSTREAM_RATE_LIMIT, "provider", f"{where} answered HTTP 429"
        return None
    limited = found[0] is R.RATE_LIMIT or (f.status == 429 and found[0] is R.OVERLOADED)
    reason = R.UPSTREAM_RATE_LIMIT if limited else found[0]
    return reason, "provider", f"{where}: {found[2]}"


# --- the rules: each returns (reason, why) or None ---------------------------------------------

_Rule = tuple[FailureReason, str] | None


def _safety(f: ErrorText) -> _Rule:
    phrase = has(f.text, ph.CONTENT_POLICY)
    return (R.CONTENT_POLICY_BLOCKED, f"safety filter: {phrase!r}") if phrase else None


def _encrypted(f: ErrorText) -> _Rule:
    if "invalid_encrypted_content" in f.codes or has(f.text, ph.ENCRYPTED_CONTENT):
        return R.INVALID_ENCRYPTED_CONTENT, "replayed encrypted reasoning could not be read"
    return None


def _extra_usage(f: ErrorText) -> _Rule:
    if has(f.text, ph.LONG_CONTEXT_BETA):
        return R.LONG_CONTEXT_BETA_FORBIDDEN, "anthropic refused the long-context beta"
    if "extra usage" in f.text and "long context" in f.text:
        return R.LONG_CONTEXT_TIER, "anthropic long-context tier requires extra usage"
    if "out of extra usage" in f.text:
        return R.BILLING, "anthropic: out of extra usage"
    return None


def _anthropic(f: ErrorText) -> _Rule:
    if "overloaded_error" in f.codes or "overloaded_error" in f.inner_codes:
        return R.OVERLOADED, "anthropic overloaded_error"
    if "credit balance is too low" in f.text:
        return R.BILLING, "anthropic: credit balance is too low"
    if f.status == 400 and "thinking" in f.text and has(
            f.text, ("signature", "cannot be modified", "must remain as they were")):
        return R.THINKING_SIGNATURE, "anthropic thinking block rejected"
    return None


def _sizes(f: ErrorText) -> _Rule:
    if phrase := has(f.text, ph.IMAGE_TOO_LARGE):
        return R.IMAGE_TOO_LARGE, f"message says {phrase!r}"
    if phrase := has(f.text, ph.OUTPUT_CAP):
        return R.OUTPUT_CAP, f"max_tokens above the model's output cap: {phrase!r}"
    if phrase := has(f.text, ("prompt is too long", "exceed context limit")):
        return R.CONTEXT_OVERFLOW, f"message says {phrase!r}"
    if "request too large for" in f.text and has(f.text, ("per min", "(tpm)")):
        return (R.PAYLOAD_TOO_LARGE,
                "one request above the per-minute token budget: no wait lets it pass")
    return None


def _quota_period(f: ErrorText) -> _Rule:
    """Google's quota errors name their period in the quota id (and free-tier metric)."""
    if f.status not in (429, None) or not ("quota" in f.text or "resource_exhausted" in f.codes):
        return None
    if "limit: 0," in f.text or "perday" in f.text or "per_day" in f.text:
        return R.BILLING, "daily or zero quota: waiting seconds will not pass it"
    if "perminute" in f.text or "per_minute" in f.text or "free_tier" in f.text:
        return R.RATE_LIMIT, "per-minute quota: the next minute may pass"
    return None


def _account(f: ErrorText) -> _Rule:
    if f.status is not None and f.status >= 500:
        return None
    code = next((c for c in f.codes if ph.CODES.get(c) == "account_blocked"), None)
    phrase = code or has(f.text, ph.ACCOUNT_BLOCKED)
    if phrase:
        return R.ACCOUNT_BLOCKED, f"refused for the whole account: {phrase!r}"
    return None


def _gateway(f: ErrorText) -> _Rule:
    if "no deployments available" in f.text:
        return R.OVERLOADED, "the proxy's deployments all cool down"
    if "does not have access to model" in f.text:
        return R.MODEL_NOT_FOUND, "the project may not use this model"
    return None


_RULES = (_safety, _encrypted, _extra_usage, _anthropic, _sizes, _quota_period, _account,
          _gateway)
