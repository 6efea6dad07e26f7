"""Rules 7: where no sandbox could start, the tool plan fails closed."""

from __future__ import annotations

import json

import attrs

from stages.decision import AskApproval, RunTools
from stages.log import events as ev
from stages.tools.plan import decide_tool_plan
from stages.tools.unconfined import UNCONFINED
from tests.stages.helpers import SETTINGS, answered, call, ran, reply, session, spec, then, turn

TOOLS = (spec("read_file", read_only=True), spec("terminal"))
UNAVAILABLE = ev.SandboxProbed(mode="workspace-write", confined=False, detail="no bwrap")


def _pending(*calls, settings=SETTINGS, probed: ev.SandboxProbed | None = UNAVAILABLE):
    state = session(*TOOLS, settings=settings)
    if probed is not None:
        state = then(state, probed)
    return answered(turn(state), reply(None, *calls))


def _command(call_id: str, command: str, **more: object):
    return call(call_id, "terminal", json.dumps({"command": command, **more}))


def test_without_a_sandbox_a_command_that_writes_asks_first() -> None:
    state = _pending(_command("c1", "make build"))
    decision = decide_tool_plan(state, config=SETTINGS)
    assert decision.events == ()
    assert decision.next == AskApproval(
        call_id="c1", tool="terminal", command="make build", pattern=UNCONFINED,
        description="would run without a sandbox (none can start on this machine)")


def test_a_background_command_asks_too() -> None:
    state = _pending(_command("c1", "python3 -m http.server", background=True))
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, AskApproval)


def test_with_nobody_to_ask_it_is_denied() -> None:
    state = _pending(_command("c1", "make build"))
    state = then(state, ev.ApprovalAnswered(call_id="c1", pattern=UNCONFINED, choice="deny",
                                            source="default"))
    (denied,) = decide_tool_plan(state, config=SETTINGS).events
    assert denied.reason == "denied"
    assert "without a sandbox" in json.loads(denied.content)["error"]


def test_an_approved_command_runs_and_the_next_one_asks_again() -> None:
    state = _pending(_command("c1", "make build"))
    state = then(state, ev.ApprovalAnswered(call_id="c1", pattern=UNCONFINED, choice="once",
                                            source="callback"))
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, RunTools)
    state = then(state, ran(call("c1", "terminal")))
    state = answered(state, reply(None, _command("c2", "make test")))
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, AskApproval)


def test_a_session_approval_holds_for_the_session() -> None:
    state = _pending(_command("c1", "make build"))
    state = then(state, ev.ApprovalAnswered(call_id="c1", pattern=UNCONFINED, choice="session",
                                            source="callback"))
    state = then(state, ran(call("c1", "terminal")))
    state = answered(state, reply(None, _command("c2", "make test")))
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, RunTools)


def test_a_dangerous_command_approved_for_this_call_is_not_asked_about_twice() -> None:
    state = _pending(_command("c1", "rm -rf build"))
    ask = decide_tool_plan(state, config=SETTINGS).next
    assert isinstance(ask, AskApproval) and ask.pattern == "recursive_delete"
    state = then(state, ev.ApprovalAnswered(call_id="c1", pattern="recursive_delete",
                                            choice="once", source="callback"))
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, RunTools)


def test_read_only_commands_run_without_a_question() -> None:
    state = _pending(_command("c1", "git status"), _command("c2", "ls -la"),
                     call("c3", "read_file", '{"path": "a"}'))
    decision = decide_tool_plan(state, config=SETTINGS)
    assert [c.call_id for c in decision.next.calls] == ["c1", "c2", "c3"]


def test_nothing_is_asked_when_the_sandbox_started() -> None:
    confined = attrs.evolve(UNAVAILABLE, confined=True, detail="bwrap")
    state = _pending(_command("c1", "make build"), probed=confined)
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, RunTools)


def test_full_access_and_allow_unconfined_are_not_asked_about() -> None:
    for settings in (attrs.evolve(SETTINGS, sandbox="full-access"),
                     attrs.evolve(SETTINGS, allow_unconfined=True)):
        state = _pending(_command("c1", "make build"), settings=settings)
        assert isinstance(decide_tool_plan(state, config=settings).next, RunTools)


def test_rules_6_runs_as_before() -> None:
    rules6 = attrs.evolve(SETTINGS, rules=6)
    state = _pending(_command("c1", "make build"), settings=rules6)
    assert isinstance(decide_tool_plan(state, config=rules6).next, RunTools)
