"""A small price table for the chat's cost estimate after each turn.

Deliberately minimal (a handful of common models, US dollars per million tokens, list prices
as published); a model it does not know has no estimate rather than a wrong one. The fuller
table for insights lives with them; this one only serves the chat's per-turn line.
"""

from __future__ import annotations

import attrs

from stages.events import Usage

__all__ = ["PRICES", "Price", "estimate_cost", "price_of"]


@attrs.frozen
class Price:
    """Dollars per million tokens: uncached input, cache reads, cache writes, output."""

    input: float
    cache_read: float
    cache_write: float
    output: float


PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.075, 0.15, 0.60),
    "gpt-4o": Price(2.50, 1.25, 2.50, 10.00),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.10, 0.40),
    "gpt-4.1-mini": Price(0.40, 0.10, 0.40, 1.60),
    "gpt-4.1": Price(2.00, 0.50, 2.00, 8.00),
    "o4-mini": Price(1.10, 0.275, 1.10, 4.40),
    "o3": Price(2.00, 0.50, 2.00, 8.00),
    "claude-3-5-haiku": Price(0.80, 0.08, 1.00, 4.00),
    "claude-haiku-4": Price(1.00, 0.10, 1.25, 5.00),
    "claude-sonnet-4": Price(3.00, 0.30, 3.75, 15.00),
    "claude-opus-4": Price(15.00, 1.50, 18.75, 75.00),
}
FREE_PROVIDERS = frozenset({"local"})


def price_of(model: str, provider: str = "") -> Price | None:
    """The price of ``model`` (a router's ``vendor/`` prefix ignored; the longest known name
    the model's name starts with wins, so ``gpt-4o-mini-2024-07-18`` is ``gpt-4o-mini``)."""
    if provider in FREE_PROVIDERS:
        return Price(0.0, 0.0, 0.0, 0.0)
    name = model.rsplit("/", 1)[-1].lower()
    known = [key for key in PRICES if name.startswith(key)]
    return PRICES[max(known, key=len)] if known else None


def estimate_cost(usage: Usage, model: str, provider: str = "") -> float | None:
    """Dollars for ``usage`` on ``model``, or None when its price is unknown."""
    price = price_of(model, provider)
    if price is None:
        return None
    return (usage.input_tokens * price.input + usage.cache_read_tokens * price.cache_read
            + usage.cache_write_tokens * price.cache_write
            + usage.output_tokens * price.output) / 1_000_000
