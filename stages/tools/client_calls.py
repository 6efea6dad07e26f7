"""Rules 8: tools the caller runs itself (a gateway's client, with OpenAI's semantics).

A turn may offer the caller's tools (``TurnStarted.client_tools``) next to the session's own.
The session runs its own calls of a reply; the calls to the caller's tools stay pending, and
the turn ends on them (``client_tool_calls``) for the caller to run. Its next turn brings the
results (``TurnStarted.tool_results``) and goes on from them.
"""

from __future__ import annotations

from stages.log.messages import ToolCall
from stages.log.state import State


def is_client_call(state: State, call: ToolCall) -> bool:
    """A call to one of the caller's tools of this turn (the session's own tool of the same
    name wins: a gateway refuses such a clash before the turn starts)."""
    turn = state.turn
    if turn is None or not turn.client_tools or state.tool(call.name) is not None:
        return False
    return any(spec.name == call.name for spec in turn.client_tools)


def own_calls(state: State) -> tuple[ToolCall, ...]:
    """The pending calls the session runs itself."""
    assert state.turn is not None
    return tuple(c for c in state.turn.pending if not is_client_call(state, c))


def client_calls(state: State) -> tuple[ToolCall, ...]:
    """The pending calls the caller runs (in the reply's order)."""
    assert state.turn is not None
    return tuple(c for c in state.turn.pending if is_client_call(state, c))
