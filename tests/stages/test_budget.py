"""Named examples for the budget stage."""

from __future__ import annotations

import attrs
import pytest

from stages.decision import NOTHING
from stages.turn.budget import DELEGATION_MAX_ITERATIONS, child_budget, decide_budget
from tests.stages.helpers import SETTINGS, answered, reply, session, turn


@pytest.mark.parametrize("requested, limit, expected", [
    (None, 50, 50), (None, 7, 7), (10, 50, 10), (50, 50, 50), (100, 50, 50),
    (0, 50, 1), (-5, 50, 1), (1, 1, 1),
])
def test_child_budget(requested: int | None, limit: int, expected: int) -> None:
    assert child_budget(requested, delegation_max_iterations=limit) == expected


def test_default_delegation_limit() -> None:
    assert child_budget(None, delegation_max_iterations=DELEGATION_MAX_ITERATIONS) == 50


def test_no_turn_means_no_budget_event() -> None:
    assert decide_budget(session(), config=SETTINGS) == NOTHING


def test_under_budget_means_nothing() -> None:
    settings = attrs.evolve(SETTINGS, max_turns=2)
    state = answered(turn(session(settings=settings)), reply("x"))
    assert state.turn.api_calls == 1
    assert decide_budget(state, config=settings) == NOTHING


def test_budget_counts_calls_of_this_turn_only() -> None:
    settings = attrs.evolve(SETTINGS, max_turns=1)
    state = answered(turn(session(settings=settings)), reply("x"))
    assert len(decide_budget(state, config=settings).events) == 1
    state = turn(state, "again", index=1)
    assert state.api_calls == 1 and state.turn.api_calls == 0
    assert decide_budget(state, config=settings) == NOTHING
