"""The tools that talk to the user or keep session state: ``clarify`` and ``todo``.

``clarify`` asks a person through a callback (it is interactive, so a batch holding it runs
one call at a time); with no callback it tells the model to decide itself. ``todo`` keeps the
session's task list; each call returns the whole list, so the list is in the tool-result trail
of the log and :meth:`TodoList.restore` rebuilds it from a resumed session's history.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence

from effects.tools.workspace import ToolError
from stages.log.messages import Message
from stages.prompt.untrusted import unwrapped

__all__ = ["TODO_STATUSES", "Clarifier", "ClarifyCallback", "TodoList"]

TODO_STATUSES = ("pending", "in_progress", "completed", "cancelled")
ClarifyCallback = Callable[[str, Sequence[str]], str]


class Clarifier:
    def __init__(self, callback: ClarifyCallback | None) -> None:
        self._callback = callback

    def clarify(self, question: str, choices: list[str] | None = None) -> dict[str, object]:
        """Ask the user a question when their intent is unclear, and wait for the answer.

        Args:
            question: The question, on its own.
            choices: Up to 4 answers to offer; the user may also answer freely.
        """
        if not question.strip():
            raise ToolError("question is empty")
        if self._callback is None:
            raise ToolError("no user can be asked in this session; decide with what you know "
                            "and say which assumption you made")
        answer = self._callback(question, tuple(choices or ())[:4])
        return {"question": question, "answer": str(answer)}


class TodoList:
    """One session's task list (thread-safe: tools may run concurrently)."""

    def __init__(self) -> None:
        self._items: list[dict[str, str]] = []
        self._lock = threading.Lock()

    def todo(self, todos: list[dict[str, str]] | None = None,
             merge: bool = False) -> dict[str, object]:
        """Read or write the session's task list; every call returns the whole list.

        Args:
            todos: Items {"id", "content", "status"} with status pending, in_progress,
                completed or cancelled. Left out: only read the list.
            merge: Update items by id and add new ones, instead of replacing the whole list.
        """
        with self._lock:
            if todos is not None:
                checked = [_checked(item, partial=merge) for item in todos]
                self._items = _merged(self._items, checked) if merge else checked
            items = [dict(item) for item in self._items]
        open_items = sum(item["status"] in ("pending", "in_progress") for item in items)
        return {"todos": items, "open": open_items}

    def restore(self, messages: Iterable[Message]) -> None:
        """Take the list from the last successful ``todo`` result in ``messages``."""
        last = None
        for message in messages:
            if message.role == "tool" and message.name == "todo" and message.content:
                last = unwrapped(message.text)  # rules 7 sends results as data blocks
        if last is None:
            return
        try:
            items = json.loads(last).get("todos")
        except (ValueError, AttributeError):
            return
        if isinstance(items, list):
            with self._lock:
                self._items = [_checked(item) for item in items if isinstance(item, dict)]


def _checked(item: object, *, partial: bool = False) -> dict[str, str]:
    """A valid item; a ``partial`` one (a merge's update) may leave out its content."""
    if not isinstance(item, dict) or not item.get("id") or not (partial or item.get("content")):
        raise ToolError('each todo needs an "id" and a "content"')
    status = item.get("status", "" if partial else "pending")
    if partial and not status:
        return {"id": str(item["id"]), "content": str(item.get("content", "")), "status": ""}
    if status not in TODO_STATUSES:
        raise ToolError(f"status must be one of {', '.join(TODO_STATUSES)}, got {status!r}")
    return {"id": str(item["id"]), "content": str(item.get("content", "")), "status": status}


def _merged(current: list[dict[str, str]], updates: list[dict[str, str]]) -> list[dict[str, str]]:
    by_id = {item["id"]: dict(item) for item in current}
    for update in updates:
        base = by_id.get(update["id"], {})
        by_id[update["id"]] = {"content": "", "status": "pending", **base,
                               **{k: v for k, v in update.items() if v}}
    return list(by_id.values())
