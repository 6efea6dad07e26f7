"""Smart model routing: named examples and a property (sessions: tests/pipeline)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.log import events as ev
from stages.turn.routing import COMPLEX_KEYWORDS, decide_routing, why_complex
from tests.stages.helpers import SETTINGS, answered, reply, session, turn

CHEAP = ev.ProviderEntry(provider="p", model="mini")
ROUTED = attrs.evolve(SETTINGS, cheap_model=CHEAP)


@pytest.mark.parametrize("text", ["hi", "What's the capital of Norway?", "thanks!",
                                  "Translate 'good morning' to French."])
def test_simple_messages_are_simple(text) -> None:
    assert why_complex(text) is None


@pytest.mark.parametrize(("text", "why"), [
    ("x" * 161, "longer than 160 characters"), ("word " * 29, "more than 28 words"),
    ("a\nb\nc", "several lines"), ("run `ls`", "code"), ("see https://x.org", "a URL"),
    ("see www.x.org", "a URL"), ("Please debug this.", "the word 'debug'"),
    ("Can you Refactor it?", "the word 'refactor'"), ("", "empty message"),
])
def test_complex_messages_say_why(text, why) -> None:
    assert why_complex(text) == why


@given(st.sampled_from(sorted(COMPLEX_KEYWORDS)), st.text("abc ", max_size=20))
def test_a_complex_keyword_always_goes_to_the_primary(keyword, padding) -> None:
    assert why_complex(f"{padding} {keyword.upper()}!") is not None


def test_the_stage_routes_only_the_first_call_and_only_when_enabled() -> None:
    state = turn(session(settings=ROUTED), "hello there")
    (chosen,) = decide_routing(state, config=ROUTED).events
    assert chosen == ev.RouteChosen(route="cheap", reason="simple_turn", model="mini")
    assert decide_routing(turn(session(), "hello there"), config=SETTINGS).events == ()
    later = answered(state, reply("hi"))
    assert decide_routing(later, config=ROUTED).events == ()
    (primary,) = decide_routing(turn(session(settings=ROUTED), "debug it"),
                                config=ROUTED).events
    assert primary.route == "primary" and primary.reason == "complex: the word 'debug'"
