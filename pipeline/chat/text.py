"""The chat's short texts, the same in the terminal and in plain (piped) output: a tool call's
argument summary, a long tool output collapsed to its first lines, the line after each turn."""

from __future__ import annotations

import json

from pipeline.insights.prices import PriceTable
from pipeline.result import TurnResult
from stages.log.events import Usage

__all__ = ["argument_summary", "collapsed", "cost_text", "shorten", "turn_line", "usage_text"]

SUMMARY_CHARS = 60
PREVIEW_LINES = 3
PREVIEW_LINE_CHARS = 100
# The argument that says most about a call of these tools.
_MAIN_ARGUMENT = {"terminal": "command", "read_file": "path", "write_file": "path",
                  "patch": "path", "search_files": "pattern", "clarify": "question",
                  "delegate_task": "goal", "skill_view": "name"}


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def argument_summary(name: str, arguments: str, limit: int = SUMMARY_CHARS) -> str:
    """``path=notes.txt``, or the command of a terminal call; the raw text when it is no JSON
    object."""
    try:
        values = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return shorten(arguments, limit)
    if not isinstance(values, dict):
        return shorten(arguments, limit)
    main = _MAIN_ARGUMENT.get(name)
    if main is not None and isinstance(values.get(main), str):
        return shorten(values[main], limit)
    parts = [f"{key}={value if isinstance(value, str) else json.dumps(value)}"
             for key, value in values.items()]
    return shorten(" ".join(parts), limit)


def collapsed(output: str, lines: int = PREVIEW_LINES) -> tuple[list[str], int]:
    """The first ``lines`` lines of ``output`` (each cut to a screen's width) and how many more
    there are."""
    all_lines = output.strip("\n").splitlines()
    shown = [line if len(line) <= PREVIEW_LINE_CHARS else line[:PREVIEW_LINE_CHARS - 1] + "…"
             for line in all_lines[:lines]]
    return shown, max(0, len(all_lines) - lines)


def cost_text(usage: Usage, model: str, provider: str, prices: PriceTable) -> str:
    cost = prices.usage_cost(usage, model, provider)
    if cost is None:
        return "cost n/a"
    return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


def usage_text(usage: Usage) -> str:
    """Tokens in (of which cache hits), out, and reasoning when there was any."""
    read, written = usage.cache_read_tokens, usage.cache_write_tokens
    total_in = usage.input_tokens + read + written
    text = f"{total_in:,} in"
    if read or written:
        text += f" ({read:,} cached" + (f", {written:,} written" if written else "") + ")"
    text += f" · {usage.output_tokens:,} out"
    if usage.reasoning_in_output:  # Anthropic: thinking counted in the output, not apart
        text += (f" ({usage.reasoning_tokens:,}+ reasoning)" if usage.reasoning_tokens
                 else " (reasoning included)")
    elif usage.reasoning_tokens:
        text += f" ({usage.reasoning_tokens:,} reasoning)"
    return text


def turn_line(result: TurnResult, seconds: float, prices: PriceTable) -> str:
    """After each turn: tokens, cache hits, estimated cost, model calls, time, and how it
    ended when that was not a plain answer."""
    calls = f"{result.api_calls} call" + ("s" if result.api_calls != 1 else "")
    parts = [usage_text(result.usage),
             cost_text(result.usage, result.model, result.provider, prices), calls,
             f"{seconds:.1f} s"]
    if not result.completed:
        parts.append(result.turn_exit_reason)
    return " · ".join(parts)
