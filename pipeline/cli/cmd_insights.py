"""``mibyan insights``: the figures of :func:`pipeline.insights.figures.summarise` as terminal
tables
(rich, the ``insights`` extra) or as JSON (``--json``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any

from pipeline import config as cfg
from pipeline.insights.figures import Insights, summarise
from pipeline.insights.prices import price_table
from pipeline.ray_cluster import on_ray

EXIT_OK = 0


def insights(args: argparse.Namespace) -> int:
    home = args.home or cfg.home()
    prices = price_table(cfg.load_file(home), args.price or ())
    found = summarise(home / "sessions", days=args.days, model=args.model, prices=prices,
                      rebuild=args.reindex, jobs=args.jobs, ray=on_ray(args))
    if args.json:
        json.dump(found.as_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        render(found)
    warn_problems(found.index["problems"])
    return EXIT_OK


def warn_problems(problems: Iterable[str]) -> None:
    """On stderr, one line per log not indexed to its end ("SESSION: why"), so that neither
    ``--json`` on stdout nor a log that holds no record at all hides it (``sql`` too)."""
    for problem in problems:
        print(f"mibyan: log problem (indexed up to it): {problem}", file=sys.stderr)


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> Any:
    from rich.table import Table
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right",
                         overflow="fold" if i == 0 else "ellipsis")
    for row in rows:
        table.add_row(*("-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)
                        for v in row))
    return table


def render(found: Insights) -> None:
    """Print ``found`` as tables on stdout."""
    try:
        from rich.console import Console
    except ImportError:  # the extra is not installed: the same figures, as JSON
        print("mibyan: install mibyan[insights] for tables; JSON follows", file=sys.stderr)
        json.dump(found.as_dict(), sys.stdout, indent=2, default=str)
        return
    # Piped, the tables keep their width rather than the 80 columns rich assumes.
    console = Console(width=None if sys.stdout.isatty() else 160)
    # rich would exit 1 itself; the command line ends every command whose reader left alike.
    console.on_broken_pipe = _reader_left  # type: ignore[method-assign]
    scope = f"since {found.since}" if found.since else "all time"
    console.print(f"[bold]mibyan insights[/bold] ({scope}"
                  + (f", model {found.model}" if found.model else "") + ")")
    for table in _tables(found):
        console.print(table)


def _reader_left() -> None:
    raise BrokenPipeError


def _reasoning(model: dict[str, Any]) -> str | int:
    """Reasoning tokens, or that a provider counted them in the output without a count of their
    own (Anthropic): 0 would claim that nothing was thought."""
    tokens, hidden = model["reasoning_tokens"], model["reasoning_in_output_calls"]
    if not hidden:
        return tokens
    within = f"in output ({hidden} call{'s' if hidden != 1 else ''})"
    return f"{tokens} + {within}" if tokens else within


def _tables(found: Insights) -> list[Any]:
    t, rec, comp = found.turns, found.recoveries, found.compressions
    overview = _table("Overview", ["", "count"], [
        ["sessions", found.sessions], *([k, v] for k, v in t.items()),
        ["interrupts", rec["interrupts"]], ["budget exhaustions", rec["budget_exhaustions"]],
        ["estimated cost (USD)", _cost(found)]])
    tokens = _table("Tokens", ["bucket", "tokens"], [[k, v] for k, v in found.tokens.items()])
    models = _table("Models", ["model", "calls", "failed", "input", "output", "cache read",
                               "cache write", "reasoning", "cost (USD)"], [
        [m["model"], m["calls"], m["failed"], m["input_tokens"], m["output_tokens"],
         m["cache_read_tokens"], m["cache_write_tokens"], _reasoning(m),
         "unpriced" if m["cost_usd"] is None else f"{m['cost_usd']:.4f}"]
        for m in found.models])
    tools = _table("Tools", ["tool", "calls", "errors", "rejected", "flagged", "error rate",
                             "p50 ms", "p90 ms"], [list(row.values()) for row in found.tools])
    latency = _table("Latency (ms)", ["of", "p50", "p90", "p99", "max"],
                     [[k, *v.values()] for k, v in found.latency_ms.items()])
    resilience = _table("Recoveries and compressions", ["", "count"], [
        *([k, v] for k, v in rec.items()), *([f"compression {k}", v] for k, v in comp.items())])
    failed = found.failures
    why_turns = _table("Unfinished turns", ["exit reason", "turns"],
                       [[r["exit_reason"], r["turns"]] for r in failed["turns"]])
    why_calls = _table("Failed model calls",
                       ["reason", "provider", "calls", "error type"],
                       [[r["reason"], r["provider"], r["calls"], r["error_type"]]
                        for r in failed["model_calls"]])
    failing_tools = _table("Failing tools", ["tool", "failed", "calls",
                                                      "most common error"],
                           [[r["tool"], r["failed"], r["calls"],
                             _short(r["most_common_error"])] for r in failed["tools"]])
    days = _table("By day", ["day", "sessions", "turns", "model calls", "tokens", "cost (USD)"],
                  [list(row.values()) for row in found.by_day])
    hours = _table("By hour (UTC)", ["hour", "turns", "model calls"],
                   [list(row.values()) for row in found.by_hour])
    return [overview, why_turns, why_calls, failing_tools, tokens, models, tools, latency,
            resilience, days, hours]


def _cost(found: Insights) -> str:
    """The priced part, and which models it leaves out (not 0.0000 when nothing is priced)."""
    if not found.unpriced_models:
        return f"{found.cost_usd:.4f}"
    unpriced = f"unpriced: {', '.join(found.unpriced_models)}"
    priced = len(found.models) > len(found.unpriced_models)
    return f"{found.cost_usd:.4f} + {unpriced}" if priced else unpriced


def _short(text: str | None, limit: int = 60) -> str | None:
    if text is None:
        return None
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
