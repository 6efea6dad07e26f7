"""Reasoning a provider issued that must go back to it exactly as it came, and the reasoning
setting (an effort, or a token budget).

A :class:`ReasoningPart` is one Anthropic ``thinking`` block (text and the signature that
authenticates it) or ``redacted_thinking`` block (opaque data), or one OpenAI Responses
``reasoning`` item (summary and ``encrypted_content``). It names the API mode and the provider
that issued it: an adapter replays only its own API's parts, to the same provider, so nothing
provider-specific leaks to another provider after a fallback. The plain reasoning text stays in
``Message.reasoning``; parts are what a later request needs to send back.
"""

from __future__ import annotations

from typing import Any

import attrs

from stages.errors import SettingError

__all__ = ["EFFORTS", "PART_TYPES", "ReasoningPart", "check_budget", "check_effort",
           "check_setting", "parse_setting"]

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
PART_TYPES = ("thinking", "redacted_thinking", "reasoning")


def check_effort(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: a reasoning effort is one of :data:`EFFORTS` (or unset)."""
    if value is not None:  # unset on nearly every turn: no call for it
        _effort(attribute.name, value)


def check_budget(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: a reasoning budget is a positive number of tokens (or unset)."""
    if value is not None:
        _budget(attribute.name, value)


def check_setting(effort: object, budget: object) -> None:
    """A ``UsageError`` for a reasoning setting no API can follow (the validators' rules)."""
    _effort("reasoning_effort", effort)
    _budget("reasoning_budget", budget)


def _effort(name: str, value: object) -> None:
    if value is not None and value not in EFFORTS:
        raise SettingError(f"{name} must be one of {', '.join(EFFORTS)}; got {value!r}")


def _budget(name: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 1):
        raise SettingError(f"{name} must be a positive number of tokens; got {value!r}")


def parse_setting(value: object) -> dict[str, Any]:
    """``reasoning = "high"`` (an effort) or ``reasoning = 8000`` (a token budget) as the
    ``reasoning_effort`` / ``reasoning_budget`` fields; a ``UsageError`` for anything else."""
    if value is None:
        return {}
    if isinstance(value, int) and not isinstance(value, bool):
        check_setting(None, value)
        return {"reasoning_budget": value}
    check_setting(value, None)
    return {"reasoning_effort": value}


@attrs.frozen(kw_only=True)
class ReasoningPart:
    """One piece of provider-issued reasoning (see the module doc). ``text`` is a thinking
    block's text; ``signature`` its signature (None: unsigned, never sent back to Anthropic);
    ``data`` a ``redacted_thinking`` block's data or a Responses item's ``encrypted_content``;
    ``summary`` a Responses item's summary texts; ``item_id`` its id (kept, not sent: a
    stateless request cannot refer to stored items)."""

    type: str = attrs.field(validator=attrs.validators.in_(PART_TYPES))
    api_mode: str
    provider: str
    text: str = ""
    signature: str | None = None
    data: str | None = None
    summary: tuple[str, ...] = ()
    item_id: str | None = None

    def replayable_to(self, api_mode: str, provider: str) -> bool:
        """Whether this part may go back in a request to ``provider`` over ``api_mode``."""
        if (self.api_mode, self.provider) != (api_mode, provider):
            return False
        if self.type == "thinking":
            return bool(self.signature)
        return bool(self.data)
