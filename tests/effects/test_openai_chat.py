"""The chat-completions adapter against the fake OpenAI server (real HTTP, JSON and SSE)."""

from __future__ import annotations

import json

import pytest

from effects.providers.openai_chat import OpenAIChatClient, request_body
from stages.decision import ModelRequest
from stages.errors import (
    ModelBehaviourError,
    ProviderHTTPError,
    ProviderTimeoutError,
    ProviderUnavailableError,
)
from stages.log.messages import Message, ToolCall
from stages.log.tool_specs import ToolSpec
from tests.fake_openai import FakeOpenAIServer, Reply, Usage

SPEC = ToolSpec(name="lookup", description="Look up.", parameters='{"type":"object"}')


def request(stream: bool, **kw) -> ModelRequest:
    history = (Message(role="user", content="hi"),
               Message(role="assistant", content=None, reasoning="hidden thoughts",
                       tool_calls=(ToolCall(id="c1", name="lookup", arguments='{"q":"x"}'),)),
               Message(role="tool", content="found", tool_call_id="c1", name="lookup"))
    kw.setdefault("provider", "fake")
    return ModelRequest(model="m", api_mode="chat_completions", purpose="step",
                        system_prompt="be brief", messages=history, tools=(SPEC,),
                        stream=stream, **kw)


@pytest.fixture
def server():
    with FakeOpenAIServer(piece_size=2) as srv:
        yield srv
        srv.assert_done()


def client(server, timeout=5.0) -> OpenAIChatClient:
    return OpenAIChatClient(base_url=server.base_url, api_key="k", provider="fake",
                            timeout=timeout)


def test_deepseek_and_kimi_get_the_reasoning_content_back(server):
    # Their thinking models refuse a tool loop whose assistant turn lost its reasoning_content.
    for echoing in ({"provider": "deepseek"}, {"base_url": "https://api.moonshot.ai/v1"},
                    {"provider": "kimi", "base_url": "http://127.0.0.1:9/v1"}):
        body = json.loads(request_body(request(False, **echoing)))
        assert body["messages"][2]["reasoning_content"] == "hidden thoughts", echoing
        assert body["messages"][2]["tool_calls"][0]["id"] == "c1"
        assert "reasoning_content" not in body["messages"][1]  # the user's
    for plain in ({}, {"provider": "openai"}, {"provider": "deepseek", "replay_reasoning": False},
                  {"base_url": "https://notdeepseek.com.example/v1"}):
        body = json.loads(request_body(request(False, **plain)))
        assert "reasoning_content" not in body["messages"][2], plain
    server.script(Reply.text("Done."))
    done = OpenAIChatClient(base_url=server.base_url, api_key="k", provider="deepseek",
                            timeout=5.0).complete(request(False, provider="deepseek"))
    assert done.message.content == "Done."
    assert server.requests[0]["messages"][2]["reasoning_content"] == "hidden thoughts"


def test_request_body_is_the_openai_shape_without_private_fields():
    body = json.loads(request_body(request(True, max_tokens=64)))
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert "reasoning" not in body["messages"][2]
    assert body["messages"][2]["tool_calls"][0]["function"] == {"name": "lookup",
                                                               "arguments": '{"q":"x"}'}
    assert body["tools"][0]["function"]["name"] == "lookup"
    assert body["max_tokens"] == 64 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [True, False])
def test_tool_call_reply_is_assembled(server, stream):
    server.script(Reply.tool_calls([("lookup", '{"q": "first query"}'), ("lookup", '{"q": 2}')],
                                   ids=["call_a", "call_b"], content="Let me check.", reasoning="think",
                                   usage=Usage(prompt=100, completion=20, cached=60,
                                               reasoning=7)))
    deltas: list[str] = []
    reply = client(server).complete(request(stream), on_delta=deltas.append)
    message = reply.message
    assert message.content == "Let me check." and message.reasoning == "think"
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("call_a", "lookup", '{"q":"first query"}'), ("call_b", "lookup", '{"q":2}')]
    assert reply.finish_reason == "tool_calls" and reply.streamed is stream
    assert (reply.usage.input_tokens, reply.usage.cache_read_tokens, reply.usage.output_tokens,
            reply.usage.reasoning_tokens) == (40, 60, 20, 7)
    assert ("".join(deltas) == "Let me check.") if stream else not deltas


@pytest.mark.parametrize("body, code", [
    ('{"error": {"code": 500, "message": "Context size has been exceeded.", '
     '"type": "server_error"}}', "500"),                                      # llama.cpp
    ('{"error": {"message": "Provider returned error", "code": 429, '
     '"metadata": {"raw": "upstream"}}}', "429"),                             # OpenRouter
    ('{"object": "error", "message": "max_tokens too large", "type": "BadRequestError", '
     '"param": null, "code": 400}', "400"),                                   # vLLM
    ('{"error": {"message": "nope", "type": "invalid_request_error", "code": null}}', None),
    ('{"error": {"error": {"message": "nested nope", "code": "bad_thing"}}}', "bad_thing"),
    ('{"error": {"message": "odd", "code": {"deep": [1]}}}', '{"deep":[1]}'),
])
def test_an_error_code_of_any_shape_reaches_the_project_as_text(server, body, code):
    server.script(Reply.raw(400, body))
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(request(False))
    assert caught.value.code == code and caught.value.status == 400
    assert json.loads(body) and caught.value.body == body


def test_an_error_chunk_inside_a_stream_keeps_its_integer_code_as_status_and_text(server):
    chunk = {"error": {"code": 400, "message": "the request exceeds the available context size",
                       "type": "exceed_context_size_error"}}
    server.script(Reply.raw(200, f"data: {json.dumps(chunk)}\n\n", "text/event-stream"))
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(request(True))
    assert (caught.value.status, caught.value.code) == (400, "400")
    assert "exceeds the available context size" in str(caught.value)


def test_http_errors_are_mapped_with_status_code_and_retry_after(server):
    server.script(Reply.error(429, "Rate limit reached", type="requests", code="rate_limit_exceeded",
                              headers={"Retry-After": "7"}))
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(request(True))
    err = caught.value
    assert (err.status, err.code, err.retry_after, err.provider) == (429, "rate_limit_exceeded",
                                                                     7.0, "fake")
    assert "Rate limit reached" in err.body


def test_dropped_stream_and_timeout_and_garbage(server):
    server.script(Reply.drop_stream(after_chunks=1), Reply.hang(3), Reply.raw(200, b"{oops"))
    with pytest.raises(ProviderUnavailableError):
        client(server).complete(request(True))
    with pytest.raises(ProviderTimeoutError):
        client(server, timeout=0.5).complete(request(False))
    with pytest.raises(ModelBehaviourError, match="not JSON"):
        client(server).complete(request(False))


@pytest.mark.parametrize("choice, wire", [
    ("auto", "auto"), ("none", "none"), ("required", "required"),
    ("lookup", {"type": "function", "function": {"name": "lookup"}}),
])
def test_tool_choice_is_sent_in_openai_shape(choice, wire):
    body = json.loads(request_body(request(False, tool_choice=choice)))
    assert body["tool_choice"] == wire


def test_a_name_repeated_in_every_delta_is_kept_once():
    from effects.providers.openai_chat import _StreamAssembly
    assembly = _StreamAssembly(None)
    for part in ('{"city"', ':"Paris"}'):
        assembly.feed({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": part}}]}}]})
    [call] = assembly.message().tool_calls
    assert (call.name, call.arguments) == ("get_weather", '{"city":"Paris"}')
