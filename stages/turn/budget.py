"""Budget stage: the iteration budget of a turn.

When the turn has used ``max_turns`` model calls, the stage asks for one last call without
tools, with a user message requesting a summary of the work so far.
"""

from __future__ import annotations

from stages.context.notes import BUDGET_PROMPT
from stages.decision import NOTHING, Decision
from stages.log.events import BudgetExhausted, SessionSettings
from stages.log.state import State

DELEGATION_MAX_ITERATIONS = 50

NO_SUMMARY_TEXT = (
    "I reached the iteration limit for this turn and could not produce a summary of the work."
)


def child_budget(requested: int | None, *, delegation_max_iterations: int) -> int:
    """A child agent's budget: its own, capped by the delegation limit."""
    if requested is None:
        return delegation_max_iterations
    return max(1, min(requested, delegation_max_iterations))


def decide_budget(state: State, *, config: SessionSettings) -> Decision:
    turn = state.turn
    if turn is None or turn.budget_exhausted or turn.api_calls < config.max_turns:
        return NOTHING
    return Decision(events=(BudgetExhausted(api_calls=turn.api_calls, max_turns=config.max_turns,
                                            prompt=BUDGET_PROMPT),))
