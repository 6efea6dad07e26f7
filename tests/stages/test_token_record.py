"""Token recording in the stages: the request asks for it only in a session that records
tokens (whose digests otherwise stay as they were), and the log never keeps ids that spell a
secret the text around them masks."""

from __future__ import annotations

import attrs

from stages.decision import CallModel
from stages.log import events as ev
from stages.log.messages import Message
from stages.log.redact import redact_event
from stages.log.tokens import ReplyTokens
from stages.turn.request import decide_request
from tests.stages.helpers import SETTINGS, session, spec, turn

OPENAI_KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"


def _request(settings: ev.SessionSettings, *tools: str) -> tuple[CallModel, str | None]:
    state = turn(session(*(spec(t) for t in tools), settings=settings))
    decision = decide_request(state, config=settings)
    assert isinstance(decision.next, CallModel)
    return decision.next, decision.events[0].digest


def test_a_session_recording_tokens_asks_for_logprobs_and_digests_it():
    recording = attrs.evolve(SETTINGS, record_tokens=True)
    plain, plain_digest = _request(SETTINGS)
    asked, asked_digest = _request(recording)
    assert not plain.request.logprobs and asked.request.logprobs
    assert plain_digest != asked_digest
    # The digest of a session that records nothing is the one it had before the setting.
    assert _request(attrs.evolve(SETTINGS, record_tokens=False))[1] == plain_digest


def test_a_recording_session_asks_for_whole_replies_where_a_stream_loses_tokens():
    local = attrs.evolve(SETTINGS, provider=ev.LOCAL_PROVIDER, stream=True)
    assert _request(local, "read_file")[0].request.stream
    recording = attrs.evolve(local, record_tokens=True)
    assert not _request(recording, "read_file")[0].request.stream
    assert not _request(recording)[0].request.stream  # the embedded model, even without tools
    other = attrs.evolve(recording, provider="vllm")
    assert _request(other)[0].request.stream  # logprobs stream, chunk by chunk
    assert not _request(other, "read_file")[0].request.stream  # a llama-server would refuse


def _replied(tokens: ReplyTokens, content: str) -> ev.ModelReplied:
    return ev.ModelReplied(message=Message(role="assistant", content=content),
                           finish_reason="stop", usage=ev.Usage(), model="m", latency_ms=1.0,
                           tokens=tokens)


def test_ids_spelling_a_masked_secret_are_withheld():
    pieces = ("my key is ", OPENAI_KEY[:10], OPENAI_KEY[10:])
    tokens = ReplyTokens(pieces=pieces, logprobs=(-0.1, -0.2, -0.3), ids=(5, 6, 7),
                         prompt_ids=(1, 2), prompt_source="llama.cpp")
    out = redact_event(_replied(tokens, "".join(pieces)))
    assert out.tokens == ReplyTokens(prompt_ids=(1, 2), prompt_source="llama.cpp",
                                     withheld="redacted")
    assert OPENAI_KEY not in repr(out)
    clean = ReplyTokens(pieces=("hi",), logprobs=(-0.1,), ids=(5,))
    assert redact_event(_replied(clean, "hi")).tokens == clean


def test_ids_pieces_and_logprobs_must_line_up():
    try:
        ReplyTokens(pieces=("a", "b"), logprobs=(-0.1,), ids=(1, 2))
    except ValueError as exc:
        assert "differ in length" in str(exc)
    else:
        raise AssertionError("a record of mismatched lengths was accepted")
