"""The tool plan's checks under rules 3: repairs, duplicates, dangerous commands, paths.

Each works on the pending calls of the last reply and returns plain data the plan turns into
events: nothing here changes what a rules-1 or rules-2 session decides.
"""

from __future__ import annotations

import json

from stages.decision import AskApproval, Decision, Finish
from stages.log.events import ToolCallRejected, ToolCallRepaired, TurnFinished
from stages.log.messages import ToolCall, canonical_json
from stages.log.rules import RuleSet
from stages.log.state import State
from stages.log.tool_specs import ToolInvocation, call_key
from stages.tools.approvals import with_reason
from stages.tools.dangerous import COMMAND_ARGUMENTS, detector
from stages.tools.repair import repair

__all__ = ["DENIED", "MAX_SAME_FAILURES", "check_danger", "duplicate_of", "halt_on_repeats",
           "repaired_calls", "shares_a_path"]

MAX_SAME_FAILURES = 3
"""A call that failed this many times in a turn, asked for once more, ends the turn."""

DENIED = {
    "callback": "the user denied running this command",
    "default": ("dangerous commands are denied in this session: no one can approve them here; "
                "find a safer way, or tell the user what to run"),
    "timeout": "no approval came in time, so the command was denied",
    "error": "the approval could not be asked for, so the command was denied",
    "decision": "the user denied running this command",
}


def repaired_calls(state: State) -> tuple[tuple[ToolCall, ...], tuple[ToolCallRepaired, ...]]:
    """The pending calls as they will run, and the repairs that made them so."""
    assert state.turn is not None
    names = tuple(spec.name for spec in state.tools)
    calls: list[ToolCall] = []
    events: list[ToolCallRepaired] = []
    for call in state.turn.pending:
        fixed = repair(call, names)
        if fixed is None:
            calls.append(call)
            continue
        calls.append(fixed.call)
        events.append(ToolCallRepaired(call_id=call.id, name=fixed.call.name,
                                       arguments=fixed.call.arguments, repairs=fixed.repairs))
    return tuple(calls), tuple(events)


def _key(call: ToolCall, names: tuple[str, ...]) -> str:
    fixed = repair(call, names)
    return call_key(fixed.call if fixed is not None else call)


def duplicate_of(state: State, call: ToolCall) -> str | None:
    """The id of an earlier call of the same reply with the same name and arguments."""
    assert state.turn is not None and state.turn.last_reply is not None
    calls = state.turn.last_reply.message.tool_calls
    before = next((i for i, c in enumerate(calls) if c.id == call.id), len(calls))
    if before == 0:  # the first call of its reply (the common case): nothing to compare
        return None
    names = tuple(spec.name for spec in state.tools)
    key = _key(call, names)
    return next((c.id for c in calls[:before] if _key(c, names) == key), None)


def _error(text: str) -> str:
    return canonical_json({"error": text})


def check_danger(state: State, call: ToolCall, invocation: ToolInvocation, *, rules: RuleSet
                 ) -> ToolInvocation | ToolCallRejected | AskApproval:
    """Run a harmless command; block a hard-dangerous one; for a dangerous one, the answer
    already given, or a request for one."""
    argument = COMMAND_ARGUMENTS.get(call.name)
    command = json.loads(invocation.arguments).get(argument) if argument else None
    danger = (detector(rules)(command, state.approved_patterns) if isinstance(command, str)
              else None)
    if danger is None or not isinstance(command, str):
        return invocation
    if danger.hard:
        return ToolCallRejected(call=call, reason="blocked", content=_error(
            f"blocked: this command {danger.description} ({danger.key}); it is never run"))
    assert state.turn is not None
    answer = next((a for a in state.turn.approvals if a[0] == call.id), None)
    if answer is None and danger.key in state.approved_patterns:
        return invocation
    if answer is None:
        return AskApproval(call_id=call.id, tool=call.name, command=command,
                           pattern=danger.key, description=danger.description)
    if answer[1] == "deny":
        why = DENIED.get(answer[2], DENIED["error"])
        text = f"denied: this command {danger.description}; {why}"
        return ToolCallRejected(call=call, reason="denied", content=_error(
            with_reason(state, call.id, text, rules=rules)))
    return invocation


def _paths(invocation: ToolInvocation) -> set[str]:
    arguments = json.loads(invocation.arguments)
    return {v for k, v in arguments.items() if k in ("path", "workdir") and isinstance(v, str)}


def shares_a_path(calls: list[ToolInvocation]) -> bool:
    """Two calls name the same path: they must run one after the other, in order."""
    seen: set[str] = set()
    for call in calls:
        paths = {p.rstrip("/") or "/" for p in _paths(call)}
        if paths & seen:
            return True
        seen |= paths
    return False


def halt_on_repeats(state: State, calls: tuple[ToolCall, ...]) -> Decision | None:
    """End the turn when the model asks again for a call that already failed
    ``MAX_SAME_FAILURES`` times in it: it is stuck in a loop."""
    assert state.turn is not None
    failed = state.turn.failed_calls
    if not failed:  # the common case: no key to compute
        return None
    stuck = next((c for c in calls if failed.count(call_key(c)) >= MAX_SAME_FAILURES), None)
    if stuck is None:
        return None
    reason = (f"the call {stuck.name} failed {MAX_SAME_FAILURES} times in this turn with the "
              "same arguments and was asked for again; stopped to break the loop")
    content = _error(f"not run: {reason}")
    rejected = tuple(ToolCallRejected(call=c, reason="repeated_failure", content=content)
                     for c in state.turn.pending)
    finished = TurnFinished(exit_reason="guardrail_halt", final_response=None, completed=False,
                            failed=True, error=reason, note=f"[stopped: {reason}]")
    return Decision(events=(*rejected, finished), next=Finish())
