"""Approvals that pause (rules 8): the turn stops with the calls pending, goes on with the
decisions (in this process or another), denied calls reach the model with the reason, and the
session replays identically."""

from __future__ import annotations

import json

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.decisions import approve, approve_for_session, deny
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from pipeline.tools import tool
from pipeline.toolsets import builtin_tools
from stages.errors import UsageError
from stages.log import events as ev
from stages.prompt.untrusted import unwrapped

RAN: list[str] = []


@tool(requires_approval=True)
def deploy(target: str) -> str:
    """Deploy the build to a target.

    Args:
        target: where to deploy
    """
    RAN.append(target)
    return f"deployed to {target}"


def _agent(tmp_path, model, **extra) -> Agent:
    work = tmp_path / "work"
    (work / "build").mkdir(parents=True, exist_ok=True)
    tools = extra.pop("tools", None)
    if tools is None:
        tools = [*builtin_tools(work, toolsets=("terminal",)), deploy]
    return Agent(client=model, tools=tools, home=tmp_path / "home", clock=FakeClock(),
                 ids=CountingIds(), approvals="pause", **extra)


def _events(agent: Agent) -> list[ev.Event]:
    path = session_path(agent.home / "sessions", agent.session_id)
    return [from_payload(e.kind, e.schema_version, e.payload) for e in read_envelopes(path)]


def _results(agent: Agent) -> list[str]:
    assert agent._runner is not None
    return [unwrapped(m.content or "") for m in agent._runner.state.messages if m.role == "tool"]


def test_a_declared_tool_pauses_the_turn_and_goes_on_when_approved(tmp_path) -> None:
    RAN.clear()
    model = ScriptedModel(tool_calls(("deploy", {"target": "staging"})), "Deployed.")
    with _agent(tmp_path, model) as agent:
        paused = agent.run("ship it")
        assert paused.paused and paused.turn_exit_reason == "awaiting_approval"
        assert not paused.completed and paused.final_response is None
        (pending,) = paused.pending_approvals
        assert (pending.tool, pending.pattern) == ("deploy", "tool:deploy")
        assert json.loads(pending.command) == {"target": "staging"}
        assert RAN == [] and len(model.requests) == 1
        assert agent.pending_approvals == paused.pending_approvals
        with pytest.raises(UsageError, match="waits for approvals"):
            agent.run("something else")
        done = agent.resume({pending.call_id: approve()})
        assert done.completed and done.final_response == "Deployed."
        assert not done.paused and agent.pending_approvals == ()
        assert RAN == ["staging"]
        kinds = [e.kind for e in _events(agent)]
        assert kinds.count("approvals_pending") == 1 and kinds.count("approvals_decided") == 1
    assert replay(tmp_path / "home" / "sessions", agent.session_id).identical


def test_a_denied_call_reaches_the_model_with_the_reason(tmp_path) -> None:
    model = ScriptedModel(tool_calls(("terminal", {"command": "rm -rf build"})), "Kept it.")
    with _agent(tmp_path, model) as agent:
        paused = agent.run("clean up")
        (pending,) = paused.pending_approvals
        assert pending.pattern == "recursive_delete" and pending.command == "rm -rf build"
        done = agent.run(decisions=[deny("the build is still needed", pending.call_id)])
        assert done.final_response == "Kept it."
        (result,) = _results(agent)
    assert (tmp_path / "work" / "build").exists()
    error = json.loads(result)["error"]
    assert error.startswith("denied: this command deletes files recursively")
    assert error.endswith("the user's reason: the build is still needed")
    # The model read it in its next request.
    assert "the build is still needed" in (model.requests[1].messages[-1].content or "")
    assert replay(tmp_path / "home" / "sessions", agent.session_id).identical


def test_every_call_of_a_batch_is_pending_and_a_session_approval_holds(tmp_path) -> None:
    RAN.clear()
    model = ScriptedModel(
        tool_calls(("deploy", {"target": "a"}), ("terminal", {"command": "rm -rf build"})),
        tool_calls(("deploy", {"target": "b"})), "Done.")
    with _agent(tmp_path, model) as agent:
        paused = agent.run("go")
        assert [p.tool for p in paused.pending_approvals] == ["deploy", "terminal"]
        first, second = (p.call_id for p in paused.pending_approvals)
        with pytest.raises(UsageError, match="no decision for pending call"):
            agent.resume({first: approve()})
        with pytest.raises(UsageError, match="no pending approval for call nope"):
            agent.resume({first: approve(), second: "deny", "nope": "once"})
        done = agent.resume({first: approve_for_session(), second: "deny"})
        # The second deploy ran without asking: approved for the session.
        assert done.completed and RAN == ["a", "b"]
    events = _events(agent)
    assert sum(isinstance(e, ev.ApprovalsPending) for e in events) == 1
    assert replay(tmp_path / "home" / "sessions", agent.session_id).identical


def test_the_pause_is_resumed_by_another_agent_on_the_same_session(tmp_path) -> None:
    RAN.clear()
    model = ScriptedModel(tool_calls(("deploy", {"target": "prod"})), "Shipped.")
    with _agent(tmp_path, model) as first:
        session_id = first.run("ship").session_id
        (pending,) = first.pending_approvals
    with _agent(tmp_path, model, session_id=session_id) as second:
        assert second.pending_approvals == (pending,)
        done = second.resume({pending.call_id: "once"})
    assert done.completed and done.final_response == "Shipped." and RAN == ["prod"]
    assert replay(tmp_path / "home" / "sessions", session_id).identical


def test_a_per_tool_setting_and_the_deny_default(tmp_path) -> None:
    model = ScriptedModel(tool_calls(("terminal", {"command": "ls"})), "Listed.")
    work = tmp_path / "work"
    work.mkdir()
    with Agent(client=model, tools=builtin_tools(work, toolsets=("terminal",)),
               home=tmp_path / "home", clock=FakeClock(), ids=CountingIds(),
               tool_approvals=["terminal"]) as agent:
        done = agent.run("list")
        (result,) = _results(agent)
    # Nobody can approve here (the library's default): denied, and the turn goes on.
    assert done.completed and not done.paused
    assert json.loads(result)["error"].startswith("denied: the tool terminal is declared")
    with pytest.raises(UsageError, match="names no tool"):
        Agent(client=model, tools=(), home=tmp_path / "h2", tool_approvals=["nope"])
