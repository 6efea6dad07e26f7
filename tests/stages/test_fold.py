"""Named examples for the fold and the upcasters."""

from __future__ import annotations

import pytest

from effects.eventlog.codec import from_payload
from stages.fold import apply_event, fold
from stages.log import events as ev
from stages.log import upcast as up
from stages.log.state import State
from tests.stages.helpers import SETTINGS, answered, call, ran, reply, session, then, turn


def test_fold_of_nothing_is_the_empty_state() -> None:
    assert fold([]) == State()


def test_a_turn_event_before_any_turn_is_refused() -> None:
    with pytest.raises(ValueError):
        apply_event(session(), reply("x"))


def test_fold_tracks_usage_calls_and_history_chars() -> None:
    c = call("c1", "read")
    state = answered(turn(session()), reply(None, c, usage=ev.Usage(input_tokens=5,
                                                                    output_tokens=2)))
    state = then(state, ran(c), *[])
    state = answered(state, reply("done", usage=ev.Usage(input_tokens=7)))
    assert state.usage == ev.Usage(input_tokens=12, output_tokens=2)
    assert state.turn.usage == state.usage
    assert state.api_calls == 2 == state.turn.api_calls
    assert state.history_chars == sum(m.chars for m in state.messages)
    assert [m.role for m in state.messages] == ["user", "assistant", "tool", "assistant"]


def test_history_loaded_replaces_the_history() -> None:
    state = answered(turn(session()), reply("x"))
    from stages.log.messages import Message
    loaded = then(state, ev.HistoryLoaded(messages=(Message(role="user", content="old"),
                                                    Message(role="assistant", content="ok"))))
    assert [m.content for m in loaded.messages] == ["old", "ok"]
    assert loaded.history_chars == sum(m.chars for m in loaded.messages)


def test_session_resumed_swaps_settings_only() -> None:
    other = ev.SessionSettings(model="other", provider="p2")
    state = then(turn(session()), ev.SessionResumed(resumed_at="t9", settings=other))
    assert state.settings == other and state.session_id == "s1"


def test_upcasters_run_in_a_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev.SystemPromptSet, "schema_version", 3)
    monkeypatch.setitem(up.UPCASTERS, ("system_prompt_set", 1), lambda p: {"body": p["t"]})
    monkeypatch.setitem(up.UPCASTERS, ("system_prompt_set", 2), lambda p: {"text": p["body"]})
    assert up.upcast("system_prompt_set", 1, {"t": "x"}) == {"text": "x"}
    assert from_payload("system_prompt_set", 1, {"t": "x"}) == ev.SystemPromptSet(text="x")
    assert from_payload("system_prompt_set", 3, {"text": "y"}) == ev.SystemPromptSet(text="y")


def test_upcast_refuses_newer_versions() -> None:
    with pytest.raises(ValueError, match="newer"):
        up.upcast("turn_finished", 2, {})


def test_settings_default_budget() -> None:
    assert ev.SessionSettings(model="m", provider="p").max_turns == 500
    assert SETTINGS.max_turns == 3
