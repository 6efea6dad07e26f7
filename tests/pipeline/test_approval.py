"""The approval flow: a scripted callback, no callback, "always" remembered, replay."""

from __future__ import annotations

import json
import threading

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.approval import AllowList, ApprovalRequest, Approver
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from pipeline.toolsets import builtin_tools
from stages.decision import AskApproval
from stages.errors import UsageError
from stages.log import events as ev
from stages.prompt.untrusted import unwrapped

ASK = AskApproval(call_id="c1", tool="terminal", command="rm -rf build",
                  pattern="recursive_delete", description="deletes files recursively")


def test_the_callback_answers_and_always_is_persisted(tmp_path) -> None:
    asked: list[ApprovalRequest] = []

    def callback(request: ApprovalRequest) -> str:
        asked.append(request)
        return "Always"

    allow = AllowList(tmp_path / "approvals.json")
    answer = Approver(callback, allowlist=allow).answer(ASK)
    assert (answer.choice, answer.source) == ("always", "callback")
    assert asked == [ApprovalRequest(tool="terminal", command="rm -rf build",
                                     pattern="recursive_delete",
                                     description="deletes files recursively")]
    assert json.loads((tmp_path / "approvals.json").read_text()) == {
        "always": ["recursive_delete"]}
    # Another session's approver does not ask again.
    again = Approver(lambda r: "deny", allowlist=AllowList(tmp_path / "approvals.json"))
    assert (again.answer(ASK).choice, again.answer(ASK).source) == ("always", "allowlist")


def test_no_callback_a_bad_answer_a_raise_or_a_timeout_deny() -> None:
    assert Approver().answer(ASK).source == "default"

    def broken(request):
        raise RuntimeError("no terminal")

    never = threading.Event()
    answers = [Approver(lambda r: "maybe").answer(ASK), Approver(broken).answer(ASK),
               Approver(lambda r: never.wait() and "once", timeout=0.01).answer(ASK)]
    never.set()
    assert [(a.choice, a.source) for a in answers] == [
        ("deny", "error"), ("deny", "error"), ("deny", "timeout")]
    assert answers[1].reason == "RuntimeError: no terminal"


def _session(tmp_path, model, callback=None):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "build").mkdir(exist_ok=True)
    return Agent(client=model, tools=builtin_tools(work, toolsets=("terminal",)),
                 home=tmp_path / "home", clock=FakeClock(), ids=CountingIds(),
                 approval_callback=callback), work


def _events(agent: Agent) -> list[ev.Event]:
    path = session_path(agent.home / "sessions", agent.session_id)
    return [from_payload(e.kind, e.schema_version, e.payload) for e in read_envelopes(path)]


def test_an_approved_command_runs_and_replay_never_asks_again(tmp_path) -> None:
    asked: list[str] = []
    model = ScriptedModel(tool_calls(("terminal", {"command": "rm -rf build"})),
                          tool_calls(("terminal", {"command": "rm -rf build && echo again"})),
                          "removed")
    agent, work = _session(tmp_path, model, lambda r: asked.append(r.command) or "session")
    with agent:
        assert agent.chat("clean up") == "removed"
        events = _events(agent)
    assert asked == ["rm -rf build"]  # the second is covered by the session approval
    assert not (work / "build").exists()
    answers = [e for e in events if isinstance(e, ev.ApprovalAnswered)]
    assert [(a.choice, a.source) for a in answers] == [("session", "callback")]
    report = replay(tmp_path / "home" / "sessions", agent.session_id)
    assert report.identical and asked == ["rm -rf build"]


def test_without_a_callback_the_model_reads_why_it_was_denied(tmp_path) -> None:
    model = ScriptedModel(tool_calls(("terminal", {"command": "rm -rf build"})), "I could not.")
    agent, work = _session(tmp_path, model)
    with agent:
        agent.chat("clean up")
        result = next(m for m in agent._runner.state.messages if m.role == "tool").content
    assert (work / "build").exists()
    assert json.loads(unwrapped(result))["error"].startswith(
        "denied: this command deletes files recursively")
    assert replay(tmp_path / "home" / "sessions", agent.session_id).identical


def test_a_hard_block_ignores_even_an_always_approval(tmp_path) -> None:
    model = ScriptedModel(tool_calls(("terminal", {"command": "rm -rf /"})), "Refused.")
    agent, _ = _session(tmp_path, model, lambda r: "always")
    with agent:
        agent.chat("wipe it")
        result = next(m for m in agent._runner.state.messages if m.role == "tool").content
    assert json.loads(unwrapped(result))["error"].startswith("blocked:")


def test_the_default_answers_without_a_callback() -> None:
    answer = Approver(default="once").answer(ASK)
    assert (answer.choice, answer.source) == ("once", "default")
    with pytest.raises(UsageError, match="must be 'deny' or 'once'"):
        Approver(default="always")
