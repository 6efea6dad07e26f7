"""Named examples for the prompt stage."""

from __future__ import annotations

import attrs

from stages import events as ev
from stages.decision import NOTHING
from stages.memory import MEMORY_FENCE_CLOSE, MEMORY_FENCE_OPEN, memory_block
from stages.prompt import DEFAULT_IDENTITY, build_system_prompt, decide_prompt
from tests.stages.helpers import SETTINGS, session, then, turn


def test_default_identity() -> None:
    decision = decide_prompt(turn(session()), config=SETTINGS)
    assert decision.events == (ev.SystemPromptSet(text=DEFAULT_IDENTITY),)


def test_configured_identity() -> None:
    settings = attrs.evolve(SETTINGS, identity="You are a pirate.")
    assert build_system_prompt(turn(session()), (), config=settings) == "You are a pirate."


def test_system_message_overrides_identity_and_memory() -> None:
    settings = attrs.evolve(SETTINGS, identity="You are a pirate.")
    state = turn(session(), system_message="Only answer in French.")
    state = attrs.evolve(state, turn=attrs.evolve(state.turn, prefetched=("remembered fact",)))
    decision = decide_prompt(state, config=settings)
    assert decision.events == (ev.SystemPromptSet(text="Only answer in French."),)


def test_memory_block_is_fenced_after_the_identity() -> None:
    text = build_system_prompt(turn(session()), ("  fact one ", "", "fact two"), config=SETTINGS)
    assert text == "\n\n".join([DEFAULT_IDENTITY, "\n".join(
        [MEMORY_FENCE_OPEN, "fact one", "fact two", MEMORY_FENCE_CLOSE])])


def test_empty_memory_adds_no_block() -> None:
    assert memory_block(()) is None
    assert memory_block(("  ", "\n")) is None


def test_stable_prompt_emits_nothing_the_second_time() -> None:
    state = turn(session())
    first = decide_prompt(state, config=SETTINGS)
    state = then(state, first)
    assert state.system_prompt == DEFAULT_IDENTITY
    assert decide_prompt(state, config=SETTINGS) == NOTHING
    state = turn(state, "next", index=1)
    assert decide_prompt(state, config=SETTINGS) == NOTHING


def test_a_changed_prompt_is_recorded_again() -> None:
    state = turn(session())
    state = then(state, decide_prompt(state, config=SETTINGS))
    state = turn(state, "next", system_message="Be brief.", index=1)
    assert decide_prompt(state, config=SETTINGS).events == (
        ev.SystemPromptSet(text="Be brief."),)
    state = then(state, decide_prompt(state, config=SETTINGS))
    state = turn(state, "and again", index=2)
    assert decide_prompt(state, config=SETTINGS).events == (
        ev.SystemPromptSet(text=DEFAULT_IDENTITY),)
