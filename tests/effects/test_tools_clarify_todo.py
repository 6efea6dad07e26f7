"""clarify through a callback; the todo list, its merge and its restore from history."""

from __future__ import annotations

import json

import pytest

from effects.tools.clarify_todo import Clarifier, TodoList
from effects.tools.workspace import ToolError
from stages.log.messages import Message


def test_clarify_asks_the_callback() -> None:
    asked = []

    def ask(question, choices):
        asked.append((question, choices))
        return "blue"

    assert Clarifier(ask).clarify("Which colour?", ["red", "blue", "a", "b", "c"]) == {
        "question": "Which colour?", "answer": "blue"}
    assert asked == [("Which colour?", ("red", "blue", "a", "b"))]


def test_clarify_without_a_user_tells_the_model_to_decide() -> None:
    with pytest.raises(ToolError, match="no user can be asked"):
        Clarifier(None).clarify("Which colour?")


def test_todo_writes_merges_and_reads() -> None:
    todos = TodoList()
    first = todos.todo([{"id": "1", "content": "write tests"}, {"id": "2", "content": "fix"}])
    assert first["open"] == 2 and first["todos"][0]["status"] == "pending"
    merged = todos.todo([{"id": "1", "status": "completed"}, {"id": "3", "content": "ship"}],
                        merge=True)
    assert [(t["id"], t["content"], t["status"]) for t in merged["todos"]] == [
        ("1", "write tests", "completed"), ("2", "fix", "pending"), ("3", "ship", "pending")]
    assert todos.todo() == merged


def test_todo_refuses_bad_items() -> None:
    with pytest.raises(ToolError, match="needs an"):
        TodoList().todo([{"content": "no id"}])
    with pytest.raises(ToolError, match="status must be one of"):
        TodoList().todo([{"id": "1", "content": "x", "status": "done-ish"}])


def test_todo_is_restored_from_the_last_todo_result() -> None:
    old = TodoList().todo([{"id": "1", "content": "old"}])
    new = TodoList().todo([{"id": "1", "content": "new", "status": "in_progress"}])
    history = [Message(role="tool", content=json.dumps(old), tool_call_id="a", name="todo"),
               Message(role="tool", content="not json", tool_call_id="x", name="other"),
               Message(role="tool", content=json.dumps(new), tool_call_id="b", name="todo")]
    todos = TodoList()
    todos.restore(history)
    assert todos.todo() == new
