"""The Responses adapter records the reply's tokens (``record_tokens``) as OpenAI sends them:
asked with ``include: ["message.output_text.logprobs"]``, each ``output_text`` part carries its
tokens' logprobs (and a stream's text deltas carry theirs). Against the loopback fake, whose
shapes the official SDK parses."""

from __future__ import annotations

import openai
import pytest

from effects.providers.openai_responses import OpenAIResponsesClient, to_responses_input
from effects.providers.token_wire import LOGPROBS_INCLUDE
from stages.decision import ModelRequest
from stages.log.messages import Message
from tests.fake_responses import FakeResponsesServer, ResponsesReply

TEXT = "Hé, the answer is 42."


def _request(*, logprobs: bool = True, stream: bool = True, **kw) -> ModelRequest:
    return ModelRequest(model="gpt-fake", provider="openai", api_mode="codex_responses",
                        purpose="step", system_prompt="Be brief.", stream=stream,
                        messages=(Message(role="user", content="What is it?"),),
                        logprobs=logprobs, **kw)


@pytest.fixture
def server():
    with FakeResponsesServer(piece_size=4) as srv:
        yield srv
        srv.assert_done()


def _complete(server: FakeResponsesServer, request: ModelRequest):
    client = OpenAIResponsesClient(base_url=server.base_url, api_key="k", timeout=5.0)
    return client.complete(request)


def test_only_a_recording_request_includes_logprobs_beside_encrypted_reasoning():
    assert "include" not in to_responses_input(_request(logprobs=False))
    assert to_responses_input(_request())["include"] == [LOGPROBS_INCLUDE]
    both = to_responses_input(_request(reasoning_effort="high"))
    assert both["include"] == ["reasoning.encrypted_content", LOGPROBS_INCLUDE]


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_records_each_tokens_piece_and_logprob(server, stream):
    server.script(ResponsesReply.text(TEXT))
    reply = _complete(server, _request(stream=stream))
    assert reply.streamed is stream
    tokens = reply.tokens
    assert tokens is not None
    assert "".join(tokens.pieces) == TEXT == reply.message.content
    assert tokens.pieces[0] == "Hé, " and len(tokens.pieces) == 6
    assert tokens.logprobs[:3] == (-0.05, -0.15, -0.25)
    # OpenAI names no ids, and no Responses server tokenises the prompt for its caller.
    assert tokens.ids is None and tokens.prompt_ids is None
    assert server.requests[0]["include"] == [LOGPROBS_INCLUDE]


def test_a_stream_whose_final_response_is_empty_keeps_the_deltas_logprobs(server):
    server.script(ResponsesReply(kind="response", content=TEXT, empty_final_output=True))
    tokens = _complete(server, _request()).tokens
    assert tokens is not None and "".join(tokens.pieces) == TEXT
    assert len(tokens.logprobs) == 6


def test_a_session_not_recording_tokens_records_none(server):
    server.script(ResponsesReply.text(TEXT), ResponsesReply.text(TEXT))
    assert _complete(server, _request(logprobs=False)).tokens is None
    assert _complete(server, _request(logprobs=False, stream=False)).tokens is None


def test_the_fakes_logprobs_are_the_shapes_the_sdk_reads(server):
    """The official SDK as the client: the part's and each delta's entries parse as its
    ``Logprob`` types, so the adapter reads what OpenAI sends."""
    server.script(ResponsesReply.text(TEXT), ResponsesReply.text(TEXT))
    sdk = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5)
    whole = sdk.responses.create(model="gpt-fake", input="What is it?",
                                 include=[LOGPROBS_INCLUDE])
    part = whole.output[0].content[0]
    assert part.type == "output_text" and part.logprobs is not None
    assert "".join(lp.token for lp in part.logprobs) == TEXT
    assert bytes(part.logprobs[0].bytes).decode() == "Hé, "
    deltas = [event for event in sdk.responses.create(
        model="gpt-fake", input="What is it?", include=[LOGPROBS_INCLUDE], stream=True)
        if event.type == "response.output_text.delta"]
    assert [lp.logprob for d in deltas for lp in d.logprobs] == [lp.logprob
                                                                 for lp in part.logprobs]
