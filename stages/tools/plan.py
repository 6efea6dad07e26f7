"""Tool-plan stage: validate the model's tool calls and decide how to run them.

Unknown tools and arguments that are not a JSON object never reach a tool: each becomes a
rejection whose error text the model reads as the call's result. Valid calls run concurrently
when there are several and none is interactive; results are recorded in call order.

Under rules 3 (``stages.tools.checks``) calls are first repaired where the intent is clear; a
call identical to an earlier one of the same reply is answered without running again; a
hard-dangerous command is blocked, a dangerous one waits for an approval (``AskApproval``);
calls naming the same path run one after the other; a call that already failed three times
in the turn, asked for again, ends the turn (``guardrail_halt``). Under rules 7, where no
sandbox could start, a command that is not plainly read-only waits for an approval too
(``stages.tools.unconfined``).
"""

from __future__ import annotations

import json

import attrs

from stages.decision import AskApproval, Decision, RunTools
from stages.log.events import Event, SessionSettings, ToolCallRejected, ToolsPlanned
from stages.log.evolve import evolve
from stages.log.messages import ToolCall, canonical_json
from stages.log.state import State
from stages.log.tool_specs import ToolInvocation
from stages.tools.approvals import check_declared
from stages.tools.checks import (
    check_danger,
    duplicate_of,
    halt_on_repeats,
    repaired_calls,
    shares_a_path,
)
from stages.tools.client_calls import own_calls
from stages.tools.unconfined import check_unconfined

Checked = ToolInvocation | ToolCallRejected | AskApproval


def _error(text: str) -> str:
    return canonical_json({"error": text})


def _parse_arguments(call: ToolCall) -> dict | str:
    """The arguments as an object, or an error text saying why they are unusable."""
    text = call.arguments.strip() or "{}"
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"arguments for tool '{call.name}' are not valid JSON ({exc}); send a JSON object"
    if not isinstance(value, dict):
        return f"arguments for tool '{call.name}' must be a JSON object, got {type(value).__name__}"
    return value


TRUNCATED = ("the reply was cut off at its token limit before this call was complete, so it "
             "did not run; call the tool again, with shorter arguments if they were long")


def _cut_off(state: State, config: SessionSettings) -> bool:
    """A reply stopped by the token limit may carry calls whose arguments were cut (some servers
    even complete them as ``{}``): under rules 2 none of them runs."""
    reply = state.turn.last_reply if state.turn is not None else None
    return (config.rule_set.cut_calls_rejected and reply is not None
            and reply.finish_reason == "length")


def _check(state: State, call: ToolCall, cut_off: bool) -> ToolInvocation | ToolCallRejected:
    if cut_off:
        return ToolCallRejected(call=call, reason="truncated", content=_error(TRUNCATED))
    if state.tool(call.name) is None:
        names = ", ".join(spec.name for spec in state.tools) or "none"
        return ToolCallRejected(call=call, reason="unknown_tool", content=_error(
            f"tool '{call.name}' does not exist. Available tools: {names}"))
    arguments = _parse_arguments(call)
    if isinstance(arguments, str):
        return ToolCallRejected(call=call, reason="invalid_arguments", content=_error(arguments))
    return ToolInvocation(call_id=call.id, name=call.name, arguments=canonical_json(arguments))


def _check_rules3(state: State, call: ToolCall, cut_off: bool, config: SessionSettings
                  ) -> Checked:
    rules = config.rule_set
    checked = _check(state, call, cut_off)
    if not isinstance(checked, ToolInvocation):
        return checked
    original = duplicate_of(state, call)
    if original is not None:
        return ToolCallRejected(call=call, reason="duplicate", content=canonical_json({
            "duplicate_of": original, "note": f"identical to call {original} of this reply, "
            "which ran once; its result is the result of this call too"}))
    checked_danger = check_danger(state, call, checked, rules=rules)
    if not isinstance(checked_danger, ToolInvocation) or not rules.unconfined_asks:
        return checked_danger
    unconfined = check_unconfined(state, call, checked_danger, config=config)
    if not isinstance(unconfined, ToolInvocation) or not rules.declared_approvals:
        return unconfined
    return check_declared(state, call, unconfined, rules=rules)


def decide_tool_plan(state: State, *, config: SessionSettings) -> Decision:
    """Reject the leading invalid calls, then run the next stretch of valid ones. A batch with
    an invalid call in the middle is planned in stretches, so that results always land in the
    order of the calls."""
    turn = state.turn
    if turn is None:
        raise ValueError("a tool plan needs an open turn")
    if config.rule_set.client_tools and turn.client_tools:
        # Rules 8: the caller's calls are its own to run; they stay pending past the plan.
        turn = evolve(turn, pending=own_calls(state))
        state = evolve(state, turn=turn)
    cut_off = _cut_off(state, config)
    if not config.rule_set.tool_checks:
        return _plan(state, [_check(state, call, cut_off) for call in turn.pending], (),
                     same_path_in_order=False, one_by_one=False)
    calls, repairs = repaired_calls(state)
    halt = halt_on_repeats(state, calls)
    if halt is not None:
        return halt
    checked = [_check_rules3(state, call, cut_off, config) for call in calls]
    return _plan(state, checked, repairs, same_path_in_order=True,
                 one_by_one=config.rule_set.sequential_one_by_one)


def _plan(state: State, checked: list[Checked], before: tuple[Event, ...], *,
          same_path_in_order: bool, one_by_one: bool) -> Decision:
    rejected: list[ToolCallRejected] = []
    while checked and isinstance(head := checked[0], ToolCallRejected):
        rejected.append(head)
        checked.pop(0)
    if checked and isinstance(ask := checked[0], AskApproval):
        # The other calls of the batch that need approval too: a pause asks about them all.
        batch = tuple(c for c in checked if isinstance(c, AskApproval))
        return Decision(events=(*before, *rejected), next=attrs.evolve(ask, batch=batch))
    valid: list[ToolInvocation] = []
    while checked and isinstance(head := checked[0], ToolInvocation):
        valid.append(head)
        checked.pop(0)
    if not valid:
        return Decision(events=(*before, *rejected))
    specs = [spec for c in valid if (spec := state.tool(c.name)) is not None]
    concurrent = len(valid) > 1 and not any(s.interactive for s in specs) and not (
        same_path_in_order and shares_a_path(valid))
    if one_by_one and not concurrent and len(valid) > 1:
        # Each result is recorded before the next call starts, so after a kill the log knows
        # which calls never started.
        valid, specs = valid[:1], specs[:1]
    planned = ToolsPlanned(call_ids=tuple(c.call_id for c in valid), concurrent=concurrent)
    return Decision(events=(*before, *rejected, planned),
                    next=RunTools(calls=tuple(valid), concurrent=concurrent,
                                  sync_first=any(not s.read_only for s in specs)))
