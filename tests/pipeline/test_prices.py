"""The one price table: found by name or prefix, overridden by config.toml and ``--price``, and
what a turn's usage costs (the chat's line and ``mibyan insights`` use the same table)."""

from __future__ import annotations

import pytest

from pipeline.insights.prices import Price, PriceTable, parse_price, price_table
from stages.errors import UsageError
from stages.log.events import Usage


def test_prices_by_name_prefix_and_override() -> None:
    table = price_table({"prices": {"house-model": {"input": 1, "output": 2}}},
                        ["gpt-4o-mini=10,20,5"])
    assert table.find("openai/gpt-4o-mini-2024-07-18") == Price(10.0, 20.0, 5.0)
    assert table.find("house-model") == Price(1.0, 2.0)
    assert table.find("claude-sonnet-4-5-20250929") == Price(3.0, 15.0, 0.3, 3.75)
    assert table.find("unknown") is None
    assert Price(1, 2).cost(input_tokens=10**6, output_tokens=10**6, cache_read_tokens=10**6) == 4
    for bad in ("gpt", "gpt=1", "gpt=a,b", "=1,2", "gpt=1,-2"):
        with pytest.raises(UsageError, match="MODEL=INPUT,OUTPUT"):
            parse_price(bad)
    with pytest.raises(UsageError, match="needs input and output"):
        price_table({"prices": {"m": {"input": 1}}})


def test_the_models_the_chat_priced_are_in_the_table() -> None:
    table = PriceTable()
    assert table.find("claude-haiku-4-20250601") == Price(1.0, 5.0, 0.1, 1.25)
    assert table.find("claude-sonnet-4-20250514") == table.find("claude-sonnet-4")
    assert table.find("GPT-4o-mini") == table.find("gpt-4o-mini")  # as the chat's table did
    for model in ("gpt-4o-mini", "gpt-4o", "gpt-4.1-nano", "gpt-4.1-mini", "gpt-4.1", "o4-mini",
                  "o3", "claude-3-5-haiku", "claude-opus-4"):
        assert table.find(model) is not None, model


def test_usage_cost_counts_every_bucket_and_says_when_it_cannot() -> None:
    usage = Usage(input_tokens=1_000_000, cache_read_tokens=1_000_000, output_tokens=1_000_000,
                  cache_write_tokens=1_000_000, reasoning_tokens=500_000)
    table = PriceTable()
    assert table.usage_cost(usage, "gpt-4o-mini-2024-07-18") == pytest.approx(
        0.15 + 0.075 + 0.15 + 0.60)  # a cache write at the input price; reasoning within output
    assert table.usage_cost(usage, "openai/gpt-4o", "openai") == pytest.approx(
        2.50 + 1.25 + 2.50 + 10.00)
    assert table.usage_cost(usage, "claude-sonnet-4") == pytest.approx(3 + 0.3 + 3.75 + 15)
    assert table.usage_cost(usage, "some-new-model") is None
    assert table.usage_cost(usage, "SmolLM2", "local") == 0.0
    overridden = price_table({"prices": {"SmolLM2": {"input": 9, "output": 9}}})
    assert overridden.usage_cost(usage, "SmolLM2", "local") == 0.0  # local stays free
    assert overridden.usage_cost(usage, "SmolLM2", "openai") == pytest.approx(36)
