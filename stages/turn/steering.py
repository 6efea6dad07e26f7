"""Where a message steered into a running turn may join it (rules 8): at a step boundary, when
the next step is a model request and the history ends where a user message may follow.

That is after a tool batch's results (a user message may follow tool messages), and after an
answer without tool calls (the turn then goes on: the model answers the steered message too).
Anywhere else (calls still waiting for their results, a failure being recovered, the user's own
message just sent) the message waits for the next boundary, so the alternation rules and the
pairing of calls with their results hold whenever it is sent.
"""

from __future__ import annotations

from stages.log.events import SessionSettings
from stages.log.state import State
from stages.turn.step import next_stage

__all__ = ["steerable"]


def steerable(state: State, config: SessionSettings) -> bool:
    """A steered message may join the conversation here."""
    turn, last = state.turn, state.last_message
    if (not config.rule_set.steering or turn is None or last is None or turn.pending
            or turn.budget_exhausted):
        return False
    if last.role == "tool":
        return next_stage(state) == "call"
    return last.role == "assistant" and not last.tool_calls and next_stage(state) == "answer"
