"""The tool plan under rules 3: repairs, duplicates, same paths, dangerous commands."""

from __future__ import annotations

import json

import attrs
from hypothesis import given
from hypothesis import strategies as st

from stages.decision import AskApproval, RunTools
from stages.log import events as ev
from stages.tools.plan import decide_tool_plan
from tests.stages.helpers import SETTINGS, answered, call, ran, reply, session, spec, then, turn

RULES2 = attrs.evolve(SETTINGS, rules=2)
TOOLS = (spec("read_file", read_only=True), spec("write_file"), spec("terminal"))


def _pending(*calls, settings=SETTINGS):
    return answered(turn(session(*TOOLS, settings=settings)), reply(None, *calls))


def _command(call_id: str, command: str):
    return call(call_id, "terminal", json.dumps({"command": command}))


def test_a_repaired_call_runs_and_the_repair_is_an_event() -> None:
    state = _pending(call("c1", "ReadFile", '{"path": "a",}'))
    decision = decide_tool_plan(state, config=SETTINGS)
    repaired, _planned = decision.events
    assert repaired == ev.ToolCallRepaired(call_id="c1", name="read_file",
                                           arguments='{"path": "a"}',
                                           repairs=("name", "trailing_commas"))
    assert isinstance(decision.next, RunTools)
    assert [(c.name, c.arguments) for c in decision.next.calls] == [("read_file",
                                                                     '{"path":"a"}')]
    after = then(state, decision, ran(call("c1", "read_file")))
    # The result answers the call by the name the model used.
    assert after.messages[-1].name == "ReadFile" and after.turn.pending == ()


def test_rules_2_does_not_repair() -> None:
    state = _pending(call("c1", "ReadFile"), settings=RULES2)
    (rejected,) = decide_tool_plan(state, config=RULES2).events
    assert rejected.reason == "unknown_tool"


def test_an_identical_call_in_the_same_reply_runs_once() -> None:
    first, same = call("c1", "read_file", '{"path": "a"}'), call("c2", "read_file", '{ "path":"a"}')
    state = _pending(first, same)
    decision = decide_tool_plan(state, config=SETTINGS)
    assert [c.call_id for c in decision.next.calls] == ["c1"]
    state = then(state, decision, ran(first))
    (duplicate,) = decide_tool_plan(state, config=SETTINGS).events
    assert duplicate.reason == "duplicate" and json.loads(duplicate.content)["duplicate_of"] == "c1"


def test_calls_naming_the_same_path_run_in_order() -> None:
    read = call("c1", "read_file", '{"path": "a"}')
    write = call("c2", "write_file", '{"path": "a", "content": "x"}')
    other = call("c3", "read_file", '{"path": "b"}')
    assert decide_tool_plan(_pending(read, write), config=SETTINGS).next.concurrent is False
    assert decide_tool_plan(_pending(read, other), config=SETTINGS).next.concurrent is True
    assert decide_tool_plan(_pending(read, write, settings=RULES2),
                            config=RULES2).next.concurrent is True


def test_a_hard_danger_is_blocked_without_asking() -> None:
    (blocked,) = decide_tool_plan(_pending(_command("c1", "rm -rf /")), config=SETTINGS).events
    assert blocked.reason == "blocked"
    assert "never run" in json.loads(blocked.content)["error"]


def test_a_dangerous_command_asks_then_runs_once_approved() -> None:
    state = _pending(_command("c1", "git push --force"), call("c2", "read_file", '{"path":"a"}'))
    decision = decide_tool_plan(state, config=SETTINGS)
    assert decision.events == ()
    assert decision.next == AskApproval(call_id="c1", tool="terminal", command="git push --force",
                                        pattern="git_force_push",
                                        description="rewrites a remote branch's history")
    state = then(state, ev.ApprovalAnswered(call_id="c1", pattern="git_force_push",
                                            choice="once", source="callback"))
    assert [c.call_id for c in decide_tool_plan(state, config=SETTINGS).next.calls] == ["c1", "c2"]
    assert state.approved_patterns == ()


def test_a_denied_command_is_rejected_with_the_reason() -> None:
    state = _pending(_command("c1", "rm -rf build"))
    state = then(state, ev.ApprovalAnswered(call_id="c1", pattern="recursive_delete",
                                            choice="deny", source="default"))
    (denied,) = decide_tool_plan(state, config=SETTINGS).events
    assert denied.reason == "denied"
    assert "no one can approve them" in json.loads(denied.content)["error"]


def test_a_session_approval_covers_later_commands_of_that_kind() -> None:
    state = _pending(_command("c1", "rm -rf build"))
    state = then(state, ev.ApprovalAnswered(call_id="c1", pattern="recursive_delete",
                                            choice="session", source="callback"))
    assert state.approved_patterns == ("recursive_delete",)
    state = then(state, ran(call("c1", "terminal")))
    state = answered(state, reply(None, _command("c2", "rm -rf dist")))
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, RunTools)


def test_rules_2_runs_dangerous_commands_as_before() -> None:
    state = _pending(_command("c1", "rm -rf /"), settings=RULES2)
    assert isinstance(decide_tool_plan(state, config=RULES2).next, RunTools)


def test_a_call_that_keeps_failing_ends_the_turn() -> None:
    state = turn(session(*TOOLS))
    broken = '{"path": "missing"}'
    for attempt in range(3):
        failing = call(f"c{attempt}", "read_file", broken)
        state = answered(state, reply(None, failing))
        state = then(state, decide_tool_plan(state, config=SETTINGS),
                     ran(failing, '{"error":"not found"}', ok=False))
    assert state.turn.failed_calls == (f"read_file\0{broken}".replace(" ", ""),) * 3
    state = answered(state, reply(None, call("c3", "read_file", broken)))
    decision = decide_tool_plan(state, config=SETTINGS)
    rejected, finished = decision.events
    assert rejected.reason == "repeated_failure"
    assert finished.exit_reason == "guardrail_halt" and finished.failed
    assert "failed 3 times" in finished.error
    after = then(state, decision)
    assert after.messages[-1].role == "assistant" and after.messages[-1].content.startswith(
        "[stopped: ")


def test_other_arguments_after_failures_still_run() -> None:
    state = turn(session(*TOOLS))
    for attempt in range(3):
        failing = call(f"c{attempt}", "read_file", '{"path": "missing"}')
        state = answered(state, reply(None, failing))
        state = then(state, decide_tool_plan(state, config=SETTINGS),
                     ran(failing, '{"error":"x"}', ok=False))
    state = answered(state, reply(None, call("c3", "read_file", '{"path": "other"}')))
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, RunTools)


_DISTINCT_READS = st.lists(st.text("abcdefgh", min_size=1, max_size=6), min_size=1, max_size=5,
                           unique=True)


@given(_DISTINCT_READS)
def test_rules_3_plans_valid_distinct_calls_as_rules_2_did(paths) -> None:
    """Nothing to repair, no duplicate, no command, no shared path: the same plan."""
    calls = [call(f"c{i}", "read_file", json.dumps({"path": p})) for i, p in enumerate(paths)]
    new = decide_tool_plan(_pending(*calls), config=SETTINGS)
    old = decide_tool_plan(_pending(*calls, settings=RULES2), config=RULES2)
    assert new == old


@given(_DISTINCT_READS, st.integers(0, 4))
def test_a_repeated_call_is_always_answered_without_running(paths, which) -> None:
    calls = [call(f"c{i}", "read_file", json.dumps({"path": p})) for i, p in enumerate(paths)]
    again = calls[which % len(calls)]
    state = _pending(*calls, call("dup", "read_file", again.arguments))
    planned = decide_tool_plan(state, config=SETTINGS)
    assert "dup" not in [c.call_id for c in planned.next.calls]


def test_the_plan_reads_commands_by_the_rules_of_the_session() -> None:
    """Rules 7 reads the command with the shell parser; a rules-6 session replays with the
    regex table it ran under, which let ``r\\m -rf`` run unasked."""
    rules6 = attrs.evolve(SETTINGS, rules=6)
    command = _command("c1", r"r\m -rf ./src")
    asked = decide_tool_plan(_pending(command), config=SETTINGS).next
    assert isinstance(asked, AskApproval) and asked.pattern == "recursive_delete"
    ran_unasked = decide_tool_plan(_pending(command, settings=rules6), config=rules6).next
    assert isinstance(ran_unasked, RunTools)


def test_a_session_approval_of_one_kind_does_not_pass_another_kind_in_the_same_command() -> None:
    """Approving recursive deletes for the session let ``rm -rf build && git push --force`` run
    unasked under the table (it acted on the first match only); rules 7 asks about the push."""
    state = _pending(_command("c1", "rm -rf build"))
    state = then(state, ev.ApprovalAnswered(call_id="c1", pattern="recursive_delete",
                                            choice="session", source="callback"))
    state = then(state, ran(call("c1", "terminal")))
    state = answered(state, reply(None, _command("c2", "rm -rf dist && git push --force")))
    asked = decide_tool_plan(state, config=SETTINGS).next
    assert isinstance(asked, AskApproval) and asked.pattern == "git_force_push"
    state = answered(state, reply(None, _command("c3", "rm -rf out")))
    assert isinstance(decide_tool_plan(state, config=SETTINGS).next, RunTools)
