"""delegate_task: a parent with parallel children, their restricted tools, an interrupt passed
on to them, and every session replaying identically."""

from __future__ import annotations

import json
import threading

import pytest

from effects.tools.workspace import ToolError
from pipeline.agent import Agent
from pipeline.delegation import Delegation
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock
from stages.log import events as ev
from stages.log.messages import Message, ToolCall
from stages.prompt.untrusted import unwrapped


def note(text: str) -> str:
    """Write a note."""
    return f"noted: {text}"


def ask_user(question: str) -> str:
    """Ask the user."""
    return "yes"


ask_user.__name__ = "clarify"


def _reply(content=None, *calls) -> ev.ModelReplied:
    return ev.ModelReplied(message=Message(role="assistant", content=content, tool_calls=calls),
                           finish_reason="tool_calls" if calls else "stop",
                           usage=ev.Usage(input_tokens=1), model="m", latency_ms=1.0)


class ByConversation:
    """A model client answering from the request: the parent delegates, each child notes its
    goal and sums up. Thread-safe, as children call it in parallel."""

    def __init__(self, block_children: bool = False, on_child=None) -> None:
        self.block_children = block_children
        self.on_child = on_child
        self.tools_seen: dict[str, tuple[str, ...]] = {}

    def complete(self, request, *, on_delta=None, cancel=None) -> ev.ModelReplied:
        first = request.messages[0].content or ""
        last = request.messages[-1]
        if first.startswith("task"):
            return self._child(request, first, last, cancel)
        if last.role == "user":
            arguments = json.dumps({"tasks": [{"goal": "task A", "context": "alpha"},
                                              {"goal": "task B"}]})
            return _reply(None, ToolCall(id="p1", name="delegate_task", arguments=arguments))
        return _reply("both done")

    def _child(self, request, first, last, cancel) -> ev.ModelReplied:
        goal = first.split("\n")[0]
        self.tools_seen[goal] = tuple(t.name for t in request.tools)
        if self.block_children:
            if self.on_child is not None:
                self.on_child()
            while not cancel.cancelled:
                threading.Event().wait(0.01)
            return _reply("never read")
        if last.role == "user":
            return _reply(None, ToolCall(id=f"n-{goal}", name="note",
                                         arguments=json.dumps({"text": goal})))
        return _reply(f"{goal} finished")


def _parent(tmp_path, client) -> tuple[Agent, Delegation]:
    delegation = Delegation()
    agent = Agent(client=client, tools=[note, ask_user, delegation.tool],
                  home=tmp_path / "home", clock=FakeClock(), ids=CountingIds())
    return agent, delegation.attach(agent)


def _tool_result(agent: Agent) -> dict:
    [content] = [m.content for m in agent._runner.state.messages if m.role == "tool"]
    return json.loads(unwrapped(content))  # what the tool returned, not its data block


def test_a_parent_gets_the_summaries_of_two_parallel_children(tmp_path) -> None:
    client = ByConversation()
    parent, delegation = _parent(tmp_path, client)
    with parent:
        assert parent.chat("split the work") == "both done"
        results = _tool_result(parent)["results"]
        parent_id = parent.session_id
    assert [(r["goal"], r["summary"], r["completed"]) for r in results] == [
        ("task A", "task A finished", True), ("task B", "task B finished", True)]
    # No further delegation, no questions to the user, in the children.
    assert client.tools_seen == {"task A": ("note",), "task B": ("note",)}
    sessions = tmp_path / "home" / "sessions"
    for child in delegation.children:
        assert child._runner.state.parent_session_id == parent_id
        assert child.settings.max_turns == 50
        assert replay(sessions, child.session_id).identical
    assert replay(sessions, parent_id).identical


def test_interrupting_the_parent_interrupts_its_children(tmp_path) -> None:
    holder: list[Agent] = []
    client = ByConversation(block_children=True, on_child=lambda: holder[0].interrupt())
    parent, delegation = _parent(tmp_path, client)
    holder.append(parent)
    with parent:
        result = parent.run("split the work")
        results = _tool_result(parent)["results"]
    assert result.interrupted and not result.completed
    assert [r["completed"] for r in results] == [False, False]
    sessions = tmp_path / "home" / "sessions"
    assert replay(sessions, result.session_id).identical
    for child in delegation.children:
        if child.session_id is not None and child._runner is not None:
            assert child._runner.state.turn.finished.interrupted
            assert replay(sessions, child.session_id).identical


def test_bad_requests_are_clear_errors(tmp_path) -> None:
    delegation = Delegation()
    with pytest.raises(ToolError, match="not attached"):
        delegation.delegate_task(goal="x")
    delegation.attach(object())  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="give a goal"):
        delegation.delegate_task()
    with pytest.raises(ToolError, match="give a goal"):
        delegation.delegate_task(tasks=[{"context": "no goal"}])
    with pytest.raises(ToolError, match="at most 10 tasks"):
        delegation.delegate_task(tasks=[{"goal": str(i)} for i in range(11)])


def test_progress_hears_each_child_s_events_with_its_goal(tmp_path) -> None:
    heard: list[tuple[str, str]] = []
    lock = threading.Lock()

    def progress(goal: str, event: ev.Event) -> None:
        with lock:
            heard.append((goal, event.kind))

    delegation = Delegation(progress=progress)
    agent = Agent(client=ByConversation(), tools=[note, delegation.tool],
                  home=tmp_path / "home", clock=FakeClock(), ids=CountingIds())
    delegation.attach(agent)
    with agent:
        assert agent.chat("split the work") == "both done"
    for goal in ("task A", "task B"):
        kinds = [kind for g, kind in heard if g == goal]
        assert kinds[0] == "session_started" and kinds[-1] == "turn_finished"
        assert "tool_ran" in kinds
