"""Named examples for the alternation checker."""

from __future__ import annotations

import pytest

from stages.log.alternation import violations
from stages.log.messages import Message, ToolCall


def sys(text: str = "s") -> Message:
    return Message(role="system", content=text)


def user(text: str = "u") -> Message:
    return Message(role="user", content=text)


def asst(text: str | None = "a", *ids: str) -> Message:
    return Message(role="assistant", content=text,
                   tool_calls=tuple(ToolCall(id=i, name="t", arguments="{}") for i in ids))


def tool(call_id: str) -> Message:
    return Message(role="tool", content="r", tool_call_id=call_id, name="t")


@pytest.mark.parametrize("messages", [
    [],
    [user()],
    [sys(), user()],
    [user(), asst()],
    [sys(), user(), asst(), user(), asst()],
    [user(), asst(None, "c1", "c2"), tool("c1"), tool("c2"), asst("done")],
    [user(), asst(None, "c1"), tool("c1"), user()],
    [user(), asst(None, "c1"), tool("c1"), asst(None, "c2"), tool("c2"), asst("ok")],
])
def test_valid_conversations(messages: list[Message]) -> None:
    assert violations(messages) == []


@pytest.mark.parametrize("messages, fragment", [
    ([user(), sys()], "a system message may only come first"),
    ([asst()], "must open with a user message"),
    ([sys(), asst()], "must open with a user message"),
    ([user(), user()], "two user messages in a row"),
    ([user(), asst(), asst()], "two assistant messages in a row"),
    ([user(), tool("c9")], "result for a call that is not open"),
    ([user(), asst(None, "c1"), tool("c1"), tool("c1")], "result for a call that is not open"),
    ([user(), asst(None, "c1"), user()], "calls ['c1'] have no result yet"),
    ([user(), asst(None, "c1", "c2"), tool("c1"), asst()], "calls ['c2'] have no result yet"),
    ([user(), asst(None, "c1")], "end: calls ['c1'] have no result"),
])
def test_violations(messages: list[Message], fragment: str) -> None:
    problems = violations(messages)
    assert any(fragment in p for p in problems), problems


def test_open_tail_is_allowed_only_when_asked() -> None:
    messages = [user(), asst(None, "c1", "c2"), tool("c1")]
    assert violations(messages, open_tail_ok=True) == []
    assert violations(messages) == ["end: calls ['c2'] have no result"]


def test_open_tail_does_not_excuse_the_middle() -> None:
    messages = [user(), asst(None, "c1"), user(), asst(None, "c2")]
    assert violations(messages, open_tail_ok=True) == [
        "message 2 (user): calls ['c1'] have no result yet"]


def test_every_problem_is_reported() -> None:
    assert len(violations([asst(), asst(), user(), user()])) == 3
