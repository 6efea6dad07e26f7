"""Anthropic's Messages API returns no logprobs: a session recording tokens with it is told so
once (rules 9, ``token_notes``), as a turn warning, and its replies record no tokens; a
session under the rules of before is told nothing (its log replays as it was written)."""

from __future__ import annotations

import attrs

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from stages.log import events as ev
from stages.turn.token_note import token_note
from tests.fake_anthropic import FakeAnthropicServer, Reply
from tests.stages.helpers import SETTINGS, session, turn

ANSWER = "It is sunny in Paris."


def test_an_anthropic_session_is_told_once_how_to_record_the_prompt(tmp_path):
    with FakeAnthropicServer() as server:
        server.script(Reply.text(ANSWER), Reply.text("Still sunny."))
        with Agent(model="claude-fake", base_url=server.base_url, api_key="sk-ant-test",
                   provider="anthropic", api_mode="anthropic_messages", home=tmp_path,
                   record_tokens=True) as agent:
            first = agent.run_conversation("What is the weather in Paris?")
            second = agent.run_conversation("And tomorrow?")
    [note] = first["warnings"]
    assert "returns no logprobs" in note and "name a tokenizer" in note
    assert second["warnings"] == []
    sid = first["session_id"]
    events = [from_payload(e.kind, e.schema_version, e.payload)
              for e in read_envelopes(session_path(tmp_path / "sessions", sid))]
    assert [e.source for e in events if isinstance(e, ev.ContextNotice)] == ["tokens"]
    assert [e.tokens for e in events if isinstance(e, ev.ModelReplied)] == [None, None]
    assert replay(tmp_path / "sessions", sid).identical


def _note(settings: ev.SessionSettings) -> tuple[ev.ContextNotice, ...]:
    return token_note(turn(session(settings=settings)), settings)


def test_only_a_recording_session_with_such_a_provider_under_rules_9_is_told():
    anthropic = attrs.evolve(SETTINGS, provider="anthropic", api_mode="anthropic_messages",
                             record_tokens=True)
    [note] = _note(anthropic)
    assert note.name == "anthropic" and "name a tokenizer" in note.detail
    named = _note(attrs.evolve(anthropic, tokenizer="org/tok"))
    assert "'org/tok'" in named[0].detail
    assert _note(attrs.evolve(anthropic, record_tokens=False)) == ()
    assert _note(attrs.evolve(anthropic, rules=8)) == ()
    assert _note(attrs.evolve(SETTINGS, record_tokens=True)) == ()  # chat completions
    fallback = attrs.evolve(SETTINGS, record_tokens=True, fallback_providers=(
        ev.ProviderEntry(provider="claude", model="c", api_mode="anthropic_messages"),))
    assert _note(fallback)[0].name == "claude"
