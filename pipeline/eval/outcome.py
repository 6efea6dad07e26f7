"""What a stretch of a session came to, measured from its records: the recorded session from
the fork point to the end of that turn, and the fork from its switch to the end of its turn,
so that both sides of a pair measure the same work."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from pipeline.insights.prices import PriceTable
from stages.log.events import Usage

__all__ = ["METRICS", "Outcome", "measure"]

# The numeric measures, in report order (scores are added by name).
METRICS = ("completed", "tool_errors", "model_calls", "input_tokens", "output_tokens",
           "cost", "latency_ms")


@attrs.frozen(kw_only=True)
class Outcome:
    completed: bool
    tool_errors: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    cost: float | None  # None: a model with no price
    latency_ms: float  # model calls plus tools, as measured
    answer: str | None
    model: str | None

    def value(self, metric: str) -> float | None:
        raw = getattr(self, metric)
        return None if raw is None else float(raw)


def measure(records: Iterable[tuple[str, Mapping[str, Any]]],
            prices: PriceTable | None = None) -> Outcome:
    """The outcome of ``(kind, payload)`` records up to the first ``turn_finished``."""
    prices = prices or PriceTable()
    completed, answer, model, provider = False, None, None, None
    tool_errors = calls = tokens_in = tokens_out = 0
    cost: float | None = 0.0
    latency = 0.0
    for kind, payload in records:
        if kind == "model_requested":
            provider = payload.get("provider")
        elif kind == "model_replied":
            calls += 1
            model = payload.get("model") or model
            usage = Usage(**payload.get("usage") or {})
            tokens_in += usage.input_tokens
            tokens_out += usage.output_tokens
            latency += float(payload.get("latency_ms") or 0.0)
            priced = prices.usage_cost(usage, model, provider)
            cost = None if cost is None or priced is None else cost + priced
        elif kind == "tool_ran":
            outcome = payload.get("outcome") or {}
            tool_errors += not outcome.get("ok", True)
            latency += float(outcome.get("duration_ms") or 0.0)
        elif kind == "turn_finished":
            completed = bool(payload.get("completed"))
            answer = payload.get("final_response")
            break
    return Outcome(completed=completed, tool_errors=tool_errors, model_calls=calls,
                   input_tokens=tokens_in, output_tokens=tokens_out,
                   cost=cost if calls else 0.0, latency_ms=round(latency, 3),
                   answer=answer, model=model)
