"""Named examples for the preflight stage and the request stage it feeds."""

from __future__ import annotations

import attrs

from stages.context.preflight import decide_preflight, estimate_tokens
from stages.decision import NOTHING
from stages.log import events as ev
from stages.log.context_tokens import CHARS_PER_TOKEN
from stages.turn.request import decide_request, request_digest
from tests.stages.helpers import SETTINGS, session, spec, then, turn

RULES_2 = attrs.evolve(SETTINGS, rules=2)


def test_no_context_length_means_nothing_under_rules_2() -> None:
    state = turn(session(settings=RULES_2), "x" * 100_000)
    assert RULES_2.context_length is None
    assert decide_preflight(state, config=RULES_2) == NOTHING


def test_under_the_threshold_means_nothing() -> None:
    for base in (SETTINGS, RULES_2):
        settings = attrs.evolve(base, context_length=100_000)
        assert decide_preflight(turn(session(settings=settings)), config=settings) == NOTHING


def test_over_the_threshold_flags_context_pressure_under_rules_2() -> None:
    settings = attrs.evolve(RULES_2, context_length=1000, preflight_threshold=0.5)
    state = turn(session(settings=settings), "x" * 4000)
    decision = decide_preflight(state, config=settings)
    estimate = estimate_tokens(state)
    assert estimate > 500
    assert decision.events == (ev.ContextPressure(estimated_tokens=estimate,
                                                  threshold_tokens=500),)


def test_rules_3_knows_a_window_for_every_model_and_says_where_it_came_from() -> None:
    state = turn(session(), "x" * 300_000)
    assert SETTINGS.context_length is None and SETTINGS.rules >= 3
    (pressure,) = decide_preflight(state, config=SETTINGS).events
    assert pressure == ev.ContextPressure(
        estimated_tokens=estimate_tokens(state), threshold_tokens=64_000, reason="preflight",
        window=128_000, window_source="default")
    assert then(state, pressure).context.pressure == "preflight"
    # Pressure already pending is not flagged twice.
    assert decide_preflight(then(state, pressure), config=SETTINGS) == NOTHING


def test_estimate_counts_history_system_prompt_and_tools() -> None:
    base = turn(session(), "x" * 40)
    with_tools = turn(session(spec("read")), "x" * 40)
    prompted = then(base, ev.SystemPromptSet(text="y" * 400))
    assert estimate_tokens(base) == base.history_chars // CHARS_PER_TOKEN
    assert base.history_chars == sum(m.chars for m in base.messages)
    assert estimate_tokens(with_tools) > estimate_tokens(base)
    assert estimate_tokens(prompted) == (base.history_chars + 400) // CHARS_PER_TOKEN


def test_request_shares_the_state_history() -> None:
    state = turn(session(spec("read")), "hello")
    decision = decide_request(state, config=SETTINGS)
    (asked,) = decision.events
    request = decision.next.request
    assert asked == ev.ModelRequested(call_index=0, purpose="step", model="m", provider="p",
                                      message_count=1, tool_count=1,
                                      estimated_tokens=estimate_tokens(state),
                                      digest=request_digest(request, state.history_digest))
    assert request.messages is state.messages
    assert request.tools == state.tools and request.purpose == "step"
