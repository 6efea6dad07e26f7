"""Named examples for the preflight stage and the request stage it feeds."""

from __future__ import annotations

import attrs

from stages import events as ev
from stages.decision import NOTHING
from stages.preflight import CHARS_PER_TOKEN, decide_preflight, estimate_tokens
from stages.request import decide_request, request_digest
from tests.stages.helpers import SETTINGS, session, spec, then, turn


def test_no_context_length_means_nothing() -> None:
    state = turn(session(), "x" * 100_000)
    assert SETTINGS.context_length is None
    assert decide_preflight(state, config=SETTINGS) == NOTHING


def test_under_the_threshold_means_nothing() -> None:
    settings = attrs.evolve(SETTINGS, context_length=100_000)
    assert decide_preflight(turn(session(settings=settings)), config=settings) == NOTHING


def test_over_the_threshold_flags_context_pressure() -> None:
    settings = attrs.evolve(SETTINGS, context_length=1000, preflight_threshold=0.5)
    state = turn(session(settings=settings), "x" * 4000)
    decision = decide_preflight(state, config=settings)
    estimate = estimate_tokens(state)
    assert estimate > 500
    assert decision.events == (ev.ContextPressure(estimated_tokens=estimate,
                                                  threshold_tokens=500),)
    assert then(state, decision) == state  # the pressure event changes no state (yet)


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
