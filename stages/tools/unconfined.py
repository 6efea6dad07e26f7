"""The tool plan's check under rules 7: where no OS sandbox could start (``SandboxProbed``),
fail closed. A terminal command that is not plainly read-only (``stages.tools.read_only``)
waits for a person's approval; with nobody to ask (cron, the gateway, batch) it is denied.
A session in full access, or one that allows unconfined commands, is not asked about.
"""

from __future__ import annotations

import json

from stages.decision import AskApproval
from stages.log.events import SessionSettings, ToolCallRejected
from stages.log.messages import ToolCall, canonical_json
from stages.log.state import State
from stages.log.tool_specs import ToolInvocation
from stages.tools.approvals import with_reason
from stages.tools.read_only import is_read_only

__all__ = ["UNCONFINED", "check_unconfined"]

UNCONFINED = "unconfined_command"
"""The approval pattern of a command that would run outside any sandbox."""

_TOOLS = {"terminal": "command"}
_DESCRIPTION = "would run without a sandbox (none can start on this machine)"


def check_unconfined(state: State, call: ToolCall, invocation: ToolInvocation, *,
                     config: SessionSettings) -> ToolInvocation | ToolCallRejected | AskApproval:
    """Run the call, reject it (the approval was denied), or ask for one."""
    argument = _TOOLS.get(call.name)
    probed = state.sandbox
    if (argument is None or probed is None or probed.confined or config.allow_unconfined
            or config.sandbox == "full-access"):
        return invocation
    command = json.loads(invocation.arguments).get(argument)
    if not isinstance(command, str) or is_read_only(command):
        return invocation
    assert state.turn is not None
    # One question per call: an answer already given for it (maybe about its danger) holds.
    answer = next((a for a in state.turn.approvals if a[0] == call.id), None)
    if answer is None and UNCONFINED in state.approved_patterns:
        return invocation
    if answer is None:
        return AskApproval(call_id=call.id, tool=call.name, command=command,
                           pattern=UNCONFINED, description=_DESCRIPTION)
    if answer[1] == "deny":
        text = (f"denied: this command {_DESCRIPTION}, and it was not approved "
                f"({answer[2]}); use read-only commands, or ask the user to run it")
        return ToolCallRejected(call=call, reason="denied", content=canonical_json({
            "error": with_reason(state, call.id, text, rules=config.rule_set)}))
    return invocation
