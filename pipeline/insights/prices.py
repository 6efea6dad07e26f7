"""What tokens cost: a table of list prices (US dollars per million tokens), overridable.

A model's price is found by its name: exactly, else by the longest known name it starts with,
in any case (``gpt-4o-mini-2024-07-18`` costs what ``gpt-4o-mini`` costs), with any
``provider/`` prefix left off; a model served by the ``local`` provider (on this machine) costs
nothing. The table is a snapshot of public list prices and goes out of date: override or add
models in ``config.toml`` (``[prices."my-model"]`` with ``input``, ``output``, ``cache_read``,
``cache_write``) or with ``mibyan insights --price MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]]``.
A model with no price gets no cost (reported as unpriced), never a guess. It is the one table:
``mibyan insights`` and the chat's cost (after each turn, ``/usage``) read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from stages.errors import UsageError
from stages.log.events import Usage

__all__ = ["DEFAULT_PRICES", "FREE_PROVIDERS", "Price", "PriceTable", "parse_price",
           "price_table"]


@attrs.frozen
class Price:
    """Dollars per million tokens of each bucket. Uncached input is ``input``; cache reads and
    writes default to the input price when a provider has no discount for them."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, *, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0,
             cache_write_tokens: int = 0) -> float:
        """The cost of a call's tokens (reasoning tokens are billed as output, within it)."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (input_tokens * self.input + output_tokens * self.output
                + cache_read_tokens * read + cache_write_tokens * write) / 1e6


DEFAULT_PRICES: Mapping[str, Price] = {
    "gpt-4o": Price(2.5, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.6, 0.075),
    "gpt-4.1": Price(2.0, 8.0, 0.5),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1),
    "gpt-4.1-nano": Price(0.1, 0.4, 0.025),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.4, 0.005),
    "o3": Price(2.0, 8.0, 0.5),
    "o4-mini": Price(1.1, 4.4, 0.275),
    "claude-opus-4": Price(15.0, 75.0, 1.5, 18.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4": Price(1.0, 5.0, 0.1, 1.25),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08, 1.0),
}
FREE_PROVIDERS = frozenset({"local"})


@attrs.frozen
class PriceTable:
    prices: Mapping[str, Price] = attrs.field(factory=lambda: dict(DEFAULT_PRICES))

    def find(self, model: str | None) -> Price | None:
        """The price of ``model``: by its exact name, else the longest known prefix."""
        if not model:
            return None
        for name in (model, model.rsplit("/", 1)[-1]):
            if name in self.prices:
                return self.prices[name]
            prefixes = [k for k in self.prices if name.lower().startswith(k.lower())]
            if prefixes:
                return self.prices[max(prefixes, key=len)]
        return None

    def usage_cost(self, usage: Usage, model: str | None,
                   provider: str | None = None) -> float | None:
        """Dollars for ``usage`` on ``model`` served by ``provider``; None when the model has
        no price."""
        if provider in FREE_PROVIDERS:
            return 0.0
        price = self.find(model)
        if price is None:
            return None
        return price.cost(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                          cache_read_tokens=usage.cache_read_tokens,
                          cache_write_tokens=usage.cache_write_tokens)

    def with_prices(self, extra: Mapping[str, Price]) -> PriceTable:
        return PriceTable({**self.prices, **extra})


_FIELDS = ("input", "output", "cache_read", "cache_write")


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise UsageError(f"{where} must be a number of dollars per million tokens >= 0, "
                         f"got {value!r}")
    return float(value)


def _from_config(name: str, entry: object) -> Price:
    where = f'config.toml [prices."{name}"]'
    if not isinstance(entry, dict):
        raise UsageError(f"{where} must be a table with input and output prices")
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown or "input" not in entry or "output" not in entry:
        raise UsageError(f"{where} needs input and output (and may have cache_read, "
                         f"cache_write); got {', '.join(sorted(entry)) or 'nothing'}")
    values = {k: _number(v, f"{where} {k}") for k, v in entry.items()}
    return Price(**values)


def parse_price(text: str) -> tuple[str, Price]:
    """``MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]]`` (dollars per million tokens)."""
    model, sep, numbers = text.partition("=")
    parts = numbers.split(",") if numbers else []
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if not sep or not model.strip() or not 2 <= len(values) <= 4 or min(values) < 0:
        raise UsageError(f"a price is MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]] in dollars "
                         f"per million tokens, got {text!r}")
    return model.strip(), Price(*values)


def price_table(config: Mapping[str, object] | None = None,
                overrides: Iterable[str] = ()) -> PriceTable:
    """The default table, then config.toml's ``[prices]``, then ``--price`` flags."""
    section = (config or {}).get("prices", {})
    if not isinstance(section, dict):
        raise UsageError('config.toml prices must be tables ([prices."model"])')
    table = PriceTable().with_prices({k: _from_config(k, v) for k, v in section.items()})
    return table.with_prices(dict(parse_price(text) for text in overrides))
