"""Reasoning in the stages: ``<think>`` splitting (whole and streamed agree), the request's
reasoning fields and digest, the rules-4 recoveries, the thinking-budget end, last_reasoning."""

from __future__ import annotations

import attrs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from effects.eventlog.codec import from_payload, to_payload
from stages.decision import CallModel, Finish, PrepareCall
from stages.log import events as ev
from stages.log.messages import Message
from stages.log.reasoning_parts import ReasoningPart
from stages.log.redact import redact_event
from stages.recovery.reasoning import THINKING_EXHAUSTED_TEXT, last_reasoning
from stages.turn.request import decide_request
from stages.turn.think_tags import ThinkSplitter, split_think
from tests.stages.helpers import SETTINGS, answered, decide_next, requested, session, then, turn

RULES3 = attrs.evolve(SETTINGS, rules=3)


def reasoning_reply(text: str, finish: str) -> ev.ModelReplied:
    return ev.ModelReplied(message=Message(role="assistant", content="", reasoning=text),
                           finish_reason=finish, usage=ev.Usage(output_tokens=9), model="m",
                           latency_ms=1.0)


# --- <think> tags -----------------------------------------------------------------------------

def test_think_blocks_are_split_from_the_answer():
    assert split_think("<think>plan</think>\n\nAnswer.") == ("Answer.", "plan")
    assert split_think("<thinking>a</thinking>B<think>c</think> d") == ("Bd", "ac")
    assert split_think("<think>cut off by the limit") == ("", "cut off by the limit")
    assert split_think("no tags, 2 < 3") == ("no tags, 2 < 3", None)


def test_text_on_either_side_of_a_block_joins_even_into_a_tag():
    # Each stretch of text is free of tags; only their join spells one (found by the property
    # below under HYPOTHESIS_PROFILE=explore).
    assert split_think("<th<think></think>ink>") == ("<think>", None)


def _text_stretches(content: str) -> list[str]:
    """The visible text between blocks: one feed emits each stretch as one piece."""
    splitter = ThinkSplitter()
    return [p for kind, p in splitter.feed(content) + splitter.finish() if kind == "text"]


@settings(max_examples=200, deadline=None)
@example(parts=["<th", "<think>", "</think>", "ink>"], cuts=[])
@given(parts=st.lists(st.sampled_from(["<think>", "</think>", "<thinking>", "</thinking>", "<",
                                       "<th", "ink>", " ", "\n", "a", "bc", "Answer."]),
                      max_size=12),
       cuts=st.lists(st.integers(1, 6), max_size=20))
def test_a_stream_split_anywhere_agrees_with_the_whole_split(parts, cuts):
    content = "".join(parts)
    splitter, pieces, at = ThinkSplitter(), [], 0
    for size in cuts:
        pieces += splitter.feed(content[at:at + size])
        at += size
    pieces += splitter.feed(content[at:]) + splitter.finish()
    text = "".join(p for kind, p in pieces if kind == "text")
    thought = "".join(p for kind, p in pieces if kind == "reasoning").strip() or None
    assert (text, thought) == split_think(content)
    assert not any(tag in stretch for stretch in _text_stretches(content)
                   for tag in ("<think>", "<thinking>"))


# --- the request ------------------------------------------------------------------------------

def test_the_turn_setting_wins_and_the_digest_keeps_old_requests_stable():
    settings_ = attrs.evolve(SETTINGS, reasoning_effort="low")
    state = then(session(settings=settings_), ev.TurnStarted(
        turn_id="t", task_id="k", started_at="t1", user_message="hi", reasoning_budget=5000))
    request = decide_request(state, config=settings_).next
    assert isinstance(request, CallModel)
    assert (request.request.reasoning_effort, request.request.reasoning_budget) == (None, 5000)
    assert request.request.cache_key == "s1" and request.request.replay_reasoning
    old = turn(session(settings=RULES3))  # rules 3: no cache key, no turn setting
    plain = decide_request(old, config=RULES3)
    assert isinstance(plain.next, CallModel) and plain.next.request.cache_key is None
    assert plain.events[0].digest == decide_request(old, config=RULES3).events[0].digest


def test_unused_fields_stay_out_of_the_log():
    payload = to_payload(ev.TurnStarted(turn_id="t", task_id="k", started_at="t1",
                                        user_message="hi"))
    assert "reasoning_effort" not in payload
    reply = reasoning_reply("r", "stop")
    assert "reasoning_parts" not in to_payload(reply)["message"]
    part = ReasoningPart(type="thinking", api_mode="anthropic_messages", provider="p",
                         text="t", signature="sig")
    signed = attrs.evolve(reply, message=attrs.evolve(reply.message, reasoning_parts=(part,)))
    assert from_payload("model_replied", 1, to_payload(signed)) == signed


def test_redacting_a_signed_thinking_text_drops_its_signature():
    secret = "sk-" + "a" * 40
    part = ReasoningPart(type="thinking", api_mode="anthropic_messages", provider="p",
                         text=f"the key is {secret}", signature="sig")
    reply = attrs.evolve(reasoning_reply("x", "stop"), message=Message(
        role="assistant", content="ok", reasoning_parts=(part,)))
    cleaned = redact_event(reply, (secret,)).message.reasoning_parts[0]
    assert secret not in cleaned.text and cleaned.signature is None
    clean = attrs.evolve(part, text="nothing secret")
    kept = redact_event(attrs.evolve(reply, message=attrs.evolve(
        reply.message, reasoning_parts=(clean,))), (secret,))
    assert kept.message.reasoning_parts == (clean,)


# --- recoveries -------------------------------------------------------------------------------

def failed(message: str, code: str | None = None) -> ev.ModelFailed:
    return ev.ModelFailed(error_type="ProviderHTTPError", message=message, status=400,
                          code=code, body=message)


SIGNATURE = "messages.1.content.0: Invalid `signature` in `thinking` block"


def test_signature_error_strips_reasoning_once_then_gives_up():
    state = turn(session())
    state = then(state, requested(state), failed(SIGNATURE))
    first = decide_next(state)
    assert first.events[0].action == "strip_reasoning" and isinstance(first.next, PrepareCall)
    state = then(state, first)
    assert state.turn.reasoning_stripped
    state = then(state, requested(state), failed(SIGNATURE))
    second = decide_next(state)
    assert isinstance(second.next, Finish) and second.events[-1].failed


def test_signature_error_under_rules_3_is_an_ordinary_retry():
    state = turn(session(settings=RULES3))
    state = then(state, requested(state), failed(SIGNATURE))
    assert decide_next(state, config=RULES3).events[0].action == "retry"


def test_unreadable_encrypted_content_stops_replay_for_the_session():
    state = turn(session())
    state = then(state, requested(state), failed("could not be verified",
                                                 "invalid_encrypted_content"))
    decision = decide_next(state)
    assert decision.events[0].action == "stop_reasoning_replay"
    state = then(state, decision, requested(state), reasoning_reply("r", "stop"))
    assert state.reasoning_replay_off
    nxt = turn(then(state, ev.TurnFinished(exit_reason="x", final_response="", completed=True)),
               "again", index=1)
    request = decide_request(nxt, config=SETTINGS).next
    assert isinstance(request, CallModel) and not request.request.replay_reasoning


# --- the end of a turn ------------------------------------------------------------------------

def test_reasoning_cut_at_the_limit_ends_the_turn_with_a_clear_reason():
    state = answered(turn(session()), reasoning_reply("pondering", "length"))
    decision = decide_next(state)
    finished = decision.events[-1]
    assert finished.exit_reason == "thinking_budget_exhausted" and finished.failed
    assert finished.error == THINKING_EXHAUSTED_TEXT
    assert last_reasoning(then(state, decision)) == "pondering"


def test_reasoning_cut_at_the_limit_under_rules_3_is_continued():
    state = answered(turn(session(settings=RULES3)), reasoning_reply("pondering", "length"))
    assert decide_next(state, config=RULES3).events[0].kind == "continuation_requested"


def test_last_reasoning_is_this_turns_only():
    state = answered(turn(session()), reasoning_reply("first turn's", "stop"))
    state = then(state, ev.TurnFinished(exit_reason="x", final_response="", completed=True))
    state = answered(turn(state, "next", index=1), ev.ModelReplied(
        message=Message(role="assistant", content="plain"), finish_reason="stop",
        usage=ev.Usage(), model="m", latency_ms=1.0))
    assert last_reasoning(state) is None
