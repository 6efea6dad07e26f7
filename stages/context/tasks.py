"""The todo list carried across a compression (rules 8 ``todo_in_summary``).

When the latest list leaves the history with the compressed middle (the ``todo`` tool's last
result, or the list a previous summary carried), the text that replaces the middle ends with
it, inside the summary block: the model keeps its plan, the next compression carries it again,
and a resumed session's toolset takes it back (``tasks_in``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from stages.context.compression_plan import is_compaction
from stages.context.summary import SUMMARY_END, summary_text
from stages.log.events import CompressionPlanned
from stages.log.messages import Message
from stages.prompt.untrusted import unwrapped

TASKS_HEADING = "## Task list (the todo tool's list when the context was compacted)"
_LINE = re.compile(r"^- \[(\w+)\] \(id (.*?)\) (.*)$")


def _items_of_result(content: str) -> list[dict[str, str]] | None:
    try:
        items = json.loads(unwrapped(content)).get("todos")
    except (ValueError, AttributeError):
        return None
    if not isinstance(items, list):
        return None
    return [{key: str(item.get(key, "")) for key in ("id", "content", "status")}
            for item in items if isinstance(item, dict)]


def tasks_in(text: str) -> list[dict[str, str]] | None:
    """The list a summary carried, or None when it carried none."""
    start = text.find(TASKS_HEADING)
    if start < 0:
        return None
    end = text.find(SUMMARY_END, start)
    block = text[start + len(TASKS_HEADING):end if end >= 0 else len(text)]
    return [{"id": m[2], "content": m[3], "status": m[1]}
            for m in map(_LINE.match, block.splitlines()) if m]


def latest_tasks(messages: Sequence[Message]) -> tuple[int, list[dict[str, str]]] | None:
    """Where the latest list stands in ``messages``, and its items."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.text
        if message.role == "tool" and message.name == "todo" and content:
            items = _items_of_result(content)
            if items is not None:
                return index, items
        elif is_compaction(message) and (items := tasks_in(content)) is not None:
            return index, items
    return None


def carried_tasks(messages: Sequence[Message], plan: CompressionPlanned) -> str | None:
    """The list's lines, when the compression takes its latest copy away: a result in the
    middle, or a previous summary (every compression replaces it)."""
    found = latest_tasks(messages)
    if found is None or not found[1]:
        return None
    index, items = found
    leaves = plan.head <= index < plan.tail_start and index != plan.kept
    if not (leaves or is_compaction(messages[index])):
        return None
    return "\n".join(f"- [{item['status']}] (id {item['id']}) "
                     + " ".join(item["content"].split()) for item in items)


def with_tasks(inserted: str, lines: str) -> str:
    """``inserted`` (a summary, or a dropped-middle marker) ending with the task list, inside
    a summary block so the next compression takes it out with the rest."""
    block = f"{TASKS_HEADING}\n{lines}\n"
    end = inserted.rfind(SUMMARY_END)
    if end >= 0:
        return f"{inserted[:end]}{block}{inserted[end:]}"
    return f"{inserted}\n{summary_text(block.rstrip())}"
