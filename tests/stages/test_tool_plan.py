"""Named examples for the tool-plan stage."""

from __future__ import annotations

import json

import attrs
import pytest

from stages.decision import PrepareCall, RunTools
from stages.log import events as ev
from stages.log.alternation import violations
from stages.tools.plan import decide_tool_plan
from tests.stages.helpers import (
    SETTINGS,
    answered,
    call,
    decide_next,
    ran,
    reply,
    session,
    spec,
    then,
    turn,
)


def _pending(*calls, tools=(spec("read", read_only=True), spec("write"))):
    return answered(turn(session(*tools)), reply(None, *calls))


def _error(event: ev.ToolCallRejected) -> str:
    return json.loads(event.content)["error"]


def test_unknown_tool_is_rejected_naming_the_available_tools() -> None:
    state = _pending(call("c1", "launch_rockets"))
    decision = decide_tool_plan(state, config=SETTINGS)
    assert decision.next is None
    (rejected,) = decision.events
    assert isinstance(rejected, ev.ToolCallRejected)
    assert rejected.reason == "unknown_tool" and rejected.call.id == "c1"
    assert _error(rejected) == ("tool 'launch_rockets' does not exist. "
                                "Available tools: read, write")


def test_unknown_tool_without_any_tools_says_none() -> None:
    state = _pending(call("c1", "x"), tools=())
    (rejected,) = decide_tool_plan(state, config=SETTINGS).events
    assert _error(rejected).endswith("Available tools: none")


def test_router_asks_the_model_again_after_rejecting_everything() -> None:
    state = _pending(call("c1", "nope"), call("c2", "read", "{oops"))
    decision = decide_next(state, config=SETTINGS)
    assert [e.reason for e in decision.events] == ["unknown_tool", "invalid_arguments"]
    assert decision.next == PrepareCall()
    after = then(state, decision)
    assert after.turn.pending == ()
    assert [m.tool_call_id for m in after.messages[-2:]] == ["c1", "c2"]
    assert violations(after.messages) == []


@pytest.mark.parametrize("arguments", ["{oops", '{"a": 1', "nan", "'single'", "{}}"])
def test_invalid_json_is_rejected(arguments: str) -> None:
    (rejected,) = decide_tool_plan(_pending(call("c1", "read", arguments)), config=SETTINGS).events
    assert rejected.reason == "invalid_arguments"
    assert "not valid JSON" in _error(rejected)
    assert "send a JSON object" in _error(rejected)


@pytest.mark.parametrize("arguments, type_name", [
    ("[1, 2]", "list"), ("3", "int"), ('"text"', "str"), ("null", "NoneType"), ("true", "bool"),
])
def test_non_object_arguments_are_rejected(arguments: str, type_name: str) -> None:
    (rejected,) = decide_tool_plan(_pending(call("c1", "read", arguments)), config=SETTINGS).events
    assert rejected.reason == "invalid_arguments"
    assert _error(rejected) == (f"arguments for tool 'read' must be a JSON object, "
                                f"got {type_name}")


@pytest.mark.parametrize("arguments", ["", "   ", "\n\t", "{}", " {} "])
def test_empty_arguments_become_an_empty_object(arguments: str) -> None:
    decision = decide_tool_plan(_pending(call("c1", "read", arguments)), config=SETTINGS)
    assert isinstance(decision.next, RunTools)
    (invocation,) = decision.next.calls
    assert invocation.arguments == "{}"


def test_arguments_are_canonicalised() -> None:
    decision = decide_tool_plan(
        _pending(call("c1", "read", '{ "b": 1, "a": "é" }')), config=SETTINGS)
    assert decision.next.calls[0].arguments == '{"a":"é","b":1}'


def test_single_call_runs_sequentially() -> None:
    decision = decide_tool_plan(_pending(call("c1", "read")), config=SETTINGS)
    assert decision.events == (ev.ToolsPlanned(call_ids=("c1",), concurrent=False),)
    assert decision.next.concurrent is False


def test_several_calls_run_concurrently() -> None:
    decision = decide_tool_plan(_pending(call("c1", "read"), call("c2", "write")),
                                config=SETTINGS)
    assert decision.events == (ev.ToolsPlanned(call_ids=("c1", "c2"), concurrent=True),)
    assert decision.next.concurrent is True
    assert [c.call_id for c in decision.next.calls] == ["c1", "c2"]


def test_an_interactive_tool_forces_sequential() -> None:
    """Under rules 3 to 7 the sequential batch is planned whole; from rules 8
    (``sequential_one_by_one``) one call at a time, the next once the first has its result."""
    tools = (spec("read", read_only=True), spec("ask", interactive=True))
    calls = (call("c1", "read"), call("c2", "ask"))
    old = attrs.evolve(SETTINGS, rules=7)
    decision = decide_tool_plan(_pending(*calls, tools=tools), config=old)
    assert decision.next.concurrent is False
    assert decision.events[-1] == ev.ToolsPlanned(call_ids=("c1", "c2"), concurrent=False)
    state = _pending(*calls, tools=tools)
    decision = decide_tool_plan(state, config=SETTINGS)
    assert decision.next.concurrent is False
    assert decision.events[-1] == ev.ToolsPlanned(call_ids=("c1",), concurrent=False)
    state = then(state, decision, ran(calls[0]))
    assert decide_tool_plan(state, config=SETTINGS).events[-1] == ev.ToolsPlanned(
        call_ids=("c2",), concurrent=False)


@pytest.mark.parametrize("names, sync_first", [
    (("read",), False), (("read", "read"), False), (("write",), True), (("read", "write"), True),
])
def test_read_only_tools_do_not_need_a_sync_first(names: tuple[str, ...], sync_first: bool) -> None:
    calls = [call(f"c{i}", name) for i, name in enumerate(names)]
    decision = decide_tool_plan(_pending(*calls), config=SETTINGS)
    assert decision.next.sync_first is sync_first


def test_an_invalid_call_in_the_middle_splits_the_plan_so_results_keep_call_order() -> None:
    calls = (call("a", "read"), call("b", "missing"), call("c", "write", '{"x":1}'),
             call("d", "read", "[]"))
    state = _pending(*calls)

    first = decide_next(state, config=SETTINGS)
    assert first.events == (ev.ToolsPlanned(call_ids=("a",), concurrent=False),)
    assert [c.call_id for c in first.next.calls] == ["a"]
    state = then(state, first, ran(calls[0]))

    second = decide_next(state, config=SETTINGS)
    assert [type(e).__name__ for e in second.events] == ["ToolCallRejected", "ToolsPlanned"]
    assert second.events[0].call.id == "b"
    assert second.events[1].call_ids == ("c",)
    assert second.next.calls[0].arguments == '{"x":1}'
    state = then(state, second, ran(calls[2]))

    third = decide_next(state, config=SETTINGS)
    assert [e.call.id for e in third.events] == ["d"]
    assert third.next == PrepareCall()
    state = then(state, third)

    results = [m.tool_call_id for m in state.messages if m.role == "tool"]
    assert results == ["a", "b", "c", "d"]
    assert violations(state.messages) == []


def test_plan_needs_an_open_turn() -> None:
    with pytest.raises(ValueError):
        decide_tool_plan(session(spec("read")), config=SETTINGS)


def test_duplicate_call_ids_in_one_reply_keep_alternation() -> None:
    dup = call("same", "read")
    state = _pending(dup, call("same", "write"))
    state = then(state, decide_next(state, config=SETTINGS))
    state = then(state, ran(dup))
    state = then(state, ran(call("same", "write")))
    assert violations(state.messages) == []


def test_calls_of_a_reply_cut_at_the_token_limit_never_run() -> None:
    """llama.cpp's Anthropic endpoint completes a cut ``tool_use`` as ``{}``: it looked valid
    and ran. Under rules 2 every call of a length-cut reply is refused; rules 1 logs replay."""
    c = call("c1", "read", "{}")
    state = answered(turn(session(spec("read"))), reply(None, c, finish_reason="length"))
    decision = decide_tool_plan(state, config=SETTINGS)
    assert [type(e).__name__ for e in decision.events] == ["ToolCallRejected"]
    assert decision.events[0].reason == "truncated" and decision.next is None
    old = decide_tool_plan(state, config=attrs.evolve(SETTINGS, rules=1))
    assert old.next is not None and old.next.calls[0].call_id == "c1"
