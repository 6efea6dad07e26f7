"""The tool plan's approval checks under rules 8, and what a pause shows.

A tool declared as needing approval (``ToolSpec.requires_approval``: ``@tool(requires_approval=
True)``, or a per-tool setting) asks before each call, unless the session approved that tool
for its rest; the answer is an observation like any approval's. A person who denies a call may
say why: the reason reaches the model with the refusal, so it can change course.
"""

from __future__ import annotations

from stages.decision import AskApproval
from stages.log.events import ToolCallRejected
from stages.log.messages import ToolCall, canonical_json
from stages.log.pause_events import PendingApproval
from stages.log.rules import RuleSet
from stages.log.state import State
from stages.log.tool_specs import ToolInvocation

__all__ = ["DECLARED", "check_declared", "pending", "tool_pattern", "with_reason"]

DECLARED = "is declared as needing approval"


def tool_pattern(name: str) -> str:
    """What an approval of a declared tool "for the session" (or "always") remembers."""
    return f"tool:{name}"


def with_reason(state: State, call_id: str, text: str, *, rules: RuleSet) -> str:
    """A refusal's text, with the reason the person gave for it (rules 8)."""
    assert state.turn is not None
    if not rules.paused_approvals:
        return text
    reason = next((r for c, r in state.turn.denials if c == call_id), None)
    return text if reason is None else f"{text}; the user's reason: {reason}"


def check_declared(state: State, call: ToolCall, invocation: ToolInvocation, *,
                   rules: RuleSet) -> ToolInvocation | ToolCallRejected | AskApproval:
    """Run the call, reject it (denied), or ask for an approval of it."""
    spec = state.tool(call.name)
    if spec is None or not spec.requires_approval:
        return invocation
    assert state.turn is not None
    pattern = tool_pattern(spec.name)
    # One question per call: an answer already given for it (maybe about its danger) holds.
    answer = next((a for a in state.turn.approvals if a[0] == call.id), None)
    if answer is None and pattern in state.approved_patterns:
        return invocation
    if answer is None:
        return AskApproval(call_id=call.id, tool=call.name, command=invocation.arguments,
                           pattern=pattern, description=DECLARED)
    if answer[1] != "deny":
        return invocation
    text = with_reason(state, call.id, f"denied: the tool {call.name} {DECLARED}, and this "
                       f"call was not approved ({answer[2]})", rules=rules)
    return ToolCallRejected(call=call, reason="denied", content=canonical_json({"error": text}))


def pending(ask: AskApproval) -> tuple[PendingApproval, ...]:
    """The calls a pause waits on: the one asked about and the others of its batch."""
    return tuple(PendingApproval(call_id=a.call_id, tool=a.tool, command=a.command,
                                 pattern=a.pattern, description=a.description)
                 for a in (ask, *(b for b in ask.batch if b.call_id != ask.call_id)))
