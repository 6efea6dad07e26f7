"""The lines ``run`` and ``fork`` print on stderr: while a turn works, each tool call with what
it was asked (the command, the path, ...), how it went and how long it took, and for the
embedded model how much it reads before it writes; after it, the usage line."""

from __future__ import annotations

import sys

from pipeline.chat.text import argument_summary
from pipeline.printable import printable
from pipeline.sandbox_settings import unconfined_notice
from stages.log.events import (
    ModelFailed,
    ModelReplied,
    RecoveryDecided,
    ToolCallRejected,
    ToolRan,
)
from stages.log.redact import redact

__all__ = ["TurnLines", "usage_line"]

_NEXT = {"retry": "retrying after a pause", "refresh": "refreshing the key",
         "rotate": "trying another key", "fallback": "trying the next provider",
         "drop_images": "retrying without the images"}


class TurnLines:
    """An event listener: tool lines, and a line for each failed model call and what follows
    (a refused connection was retried for 35-45 s with nothing shown); ``progress`` also
    names the prompt size before each call of the embedded model."""

    def __init__(self, *, progress: bool = False) -> None:
        self.progress = progress
        self._arguments: dict[str, str] = {}
        self._failure = ""

    def __call__(self, event: object) -> None:
        if self.progress:
            from pipeline.cli.local_profile import show_progress
            show_progress(event)
        if (notice := unconfined_notice(event)) is not None:
            print(printable(f"mibyan: {notice}"), file=sys.stderr)
        elif isinstance(event, ModelReplied):
            for call in event.message.tool_calls:
                self._arguments[call.id] = argument_summary(call.name, call.arguments)
        elif isinstance(event, ToolRan):
            o = event.outcome
            status = "ok" if o.ok else f"error: {o.error}"
            self._line(o.name, self._arguments.pop(o.call_id, ""),
                       f"-> {status} ({o.duration_ms:.0f} ms)")
        elif isinstance(event, ModelFailed):
            self._failure = event.message.split("\n", 1)[0]
        elif isinstance(event, RecoveryDecided) and event.action != "fail":
            print(printable(redact(f"mibyan: {self._failure or event.reason}; "
                                   f"{_NEXT.get(event.action, event.action)}")),
                  file=sys.stderr)
        elif isinstance(event, ToolCallRejected):
            self._arguments.pop(event.call.id, None)
            self._line(event.call.name,
                       argument_summary(event.call.name, event.call.arguments),
                       f"rejected: {event.reason}")

    @staticmethod
    def _line(*parts: str) -> None:
        # The listener sees events before the log's redaction: shown text is masked here.
        text = " ".join(part for part in parts if part)
        print(printable(redact(f"  [tool] {text}")), file=sys.stderr)


def usage_line(result: dict) -> str:
    u = result["usage"]
    return (f"[session {result['session_id']} | {result['model']} | {result['api_calls']} "
            f"calls | tokens in {u['input_tokens']} out {u['output_tokens']} cache r/w "
            f"{u['cache_read_tokens']}/{u['cache_write_tokens']} reasoning "
            f"{_reasoning(u)} total {u['total_tokens']} | {result['turn_exit_reason']}"
            + (f" | rate limits: {result['rate_limits']}" if result["rate_limits"] else "") + "]")


def _reasoning(usage: dict) -> str:
    """The reasoning count, or what the provider left unsaid (Anthropic counts thinking
    inside the output tokens without a count of its own)."""
    count = usage["reasoning_tokens"]
    return "n/a (counted in out)" if count is None else str(count)
