"""The Responses adapter: pure conversion, and real HTTP against the fake Responses server."""

from __future__ import annotations

import openai
import pydantic
import pytest
from openai.types.responses import FunctionToolParam, ResponseInputParam

from effects.protocols import CancelToken
from effects.providers.openai_responses import OpenAIResponsesClient, to_responses_input
from stages.decision import ModelRequest
from stages.errors import (
    ModelBehaviourError,
    ProviderHTTPError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    UsageError,
)
from stages.log.messages import Message, ToolCall
from stages.log.tool_specs import ToolSpec
from tests.effects.cancelling import cancelled_after
from tests.fake_responses import FakeResponsesServer, ResponsesReply, Usage

SPEC = ToolSpec(name="lookup", description="Look up.",
                parameters='{"properties":{"q":{"type":"string"}},"type":"object"}')
HISTORY = (Message(role="user", content="hi"),
           Message(role="assistant", content="Checking.", reasoning="hidden thoughts",
                   tool_calls=(ToolCall(id="c1", name="lookup", arguments='{"q":"x"}'),)),
           Message(role="tool", content="found", tool_call_id="c1", name="lookup"),
           Message(role="assistant", content="It is x."),
           Message(role="user", content="and y?"))


def request(stream: bool = True, **kw) -> ModelRequest:
    fields = dict(model="m", provider="fake", api_mode="codex_responses", purpose="step",
                  system_prompt="be brief", messages=HISTORY, tools=(SPEC,), stream=stream)
    return ModelRequest(**{**fields, **kw})


# --- conversion (no HTTP) -------------------------------------------------------------------

def test_history_becomes_responses_input_items():
    body = to_responses_input(request(max_tokens=64, reasoning_effort="high"))
    assert body["instructions"] == "be brief" and body["store"] is False
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q":"x"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "found"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "It is x."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and y?"}]},
    ]
    assert body["tools"] == [{"type": "function", "name": "lookup", "description": "Look up.",
                              "parameters": {"properties": {"q": {"type": "string"}},
                                             "type": "object"},
                              "strict": False}]
    assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is True
    assert body["max_output_tokens"] == 64 and body["stream"] is True
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert "messages" not in body and "max_tokens" not in body


def test_the_body_matches_the_sdk_param_types():
    """The SDK types an assistant ``output_text`` message as a stored output item (with id and
    status); stateless clients (the Codex CLI, mibyan) send it without them, which OpenAI takes
    and llama.cpp requires. Every other item must match the SDK's types as they are."""
    body = to_responses_input(request())
    stored = [dict(item, id=f"msg_{n}", status="completed") if item.get("role") == "assistant"
              else item for n, item in enumerate(body["input"])]
    pydantic.TypeAdapter(ResponseInputParam).validate_python(stored)
    pydantic.TypeAdapter(list[FunctionToolParam]).validate_python(body["tools"])


@pytest.mark.parametrize(("choice", "wire"), [
    (None, "auto"), ("auto", "auto"), ("none", "none"), ("required", "required"),
    ("lookup", {"type": "function", "name": "lookup"})])
def test_tool_choice_mapping(choice, wire):
    assert to_responses_input(request(tool_choice=choice))["tool_choice"] == wire


def test_without_tools_there_is_no_tool_setting_and_no_optional_field():
    body = to_responses_input(request(stream=False, tools=(), system_prompt=None,
                                      tool_choice="required",
                                      messages=(Message(role="user", content="x"),)))
    assert set(body) == {"model", "store", "input"}


def test_an_assistant_message_with_only_tool_calls_sends_no_message_item():
    history = (Message(role="user", content="go"),
               Message(role="assistant", content=None,
                       tool_calls=(ToolCall(id="a", name="lookup", arguments="{}"),)),
               Message(role="tool", content="", tool_call_id="a"))
    items = to_responses_input(request(messages=history))["input"]
    assert [i["type"] for i in items] == ["message", "function_call", "function_call_output"]


# --- HTTP against the fake ------------------------------------------------------------------

@pytest.fixture
def server():
    with FakeResponsesServer(piece_size=2) as srv:
        yield srv
        srv.assert_done()


def client(server, timeout=5.0, **kw) -> OpenAIResponsesClient:
    return OpenAIResponsesClient(base_url=server.base_url, api_key="k", provider="fake",
                                 timeout=timeout, **kw)


@pytest.mark.parametrize("stream", [True, False])
def test_text_reply_with_reasoning_usage_and_rate_limits(server, stream):
    server.script(ResponsesReply.text("Hello there, friend.", reasoning="think first",
                                      usage=Usage(prompt=100, completion=20, cached=60,
                                                  reasoning=7))
                  .with_headers({"X-RateLimit-Remaining-Requests": "59",
                                 "x-ratelimit-reset-tokens": "6ms"}))
    deltas: list[str] = []
    reply = client(server).complete(request(stream), on_delta=deltas.append)
    assert reply.message.content == "Hello there, friend."
    assert reply.message.reasoning == "think first" and reply.message.tool_calls == ()
    assert reply.finish_reason == "stop" and reply.streamed is stream and reply.model == "m"
    assert (reply.usage.input_tokens, reply.usage.cache_read_tokens, reply.usage.output_tokens,
            reply.usage.reasoning_tokens) == (40, 60, 20, 7)
    assert reply.rate_limits == (("x-ratelimit-remaining-requests", "59"),
                                 ("x-ratelimit-reset-tokens", "6ms"))
    assert deltas == (["He", "ll", "o ", "th", "er", "e,", " f", "ri", "en", "d."]
                      if stream else [])
    sent = server.last_request
    assert sent["input"][-1]["content"][0]["text"] == "and y?" and sent.get("stream") is (
        True if stream else None)


@pytest.mark.parametrize("stream", [True, False])
def test_function_calls_with_arguments_in_pieces(server, stream):
    server.script(ResponsesReply.function_calls(
        [("lookup", '{"q": "first query"}'), ("lookup", '{"q": 2}')], ids=["call_a", "call_b"],
        content="Let me check."))
    deltas: list[str] = []
    reply = client(server).complete(request(stream), on_delta=deltas.append)
    assert [(c.id, c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("call_a", "lookup", '{"q":"first query"}'), ("call_b", "lookup", '{"q":2}')]
    assert reply.message.content == "Let me check." and reply.finish_reason == "tool_calls"
    assert "".join(deltas) == ("Let me check." if stream else "")


@pytest.mark.parametrize("stream", [True, False])
def test_reasoning_only_is_incomplete(server, stream):
    server.script(ResponsesReply.reasoning_only("planning"), ResponsesReply.reasoning_only())
    for thought in ("planning", None):
        reply = client(server).complete(request(stream))
        assert reply.finish_reason == "incomplete"
        assert reply.message.content == "" and reply.message.reasoning == thought


@pytest.mark.parametrize("stream", [True, False])
def test_incomplete_responses(server, stream):
    server.script(ResponsesReply.incomplete("Cut o", "max_output_tokens"),
                  ResponsesReply.incomplete("Blocked", "content_filter"),
                  ResponsesReply.incomplete("Too many", "max_messages"),
                  ResponsesReply.text("Looking around.", phase="commentary"))
    reasons = [client(server).complete(request(stream)).finish_reason for _ in range(4)]
    assert reasons == ["length", "content_filter", "incomplete", "incomplete"]


@pytest.mark.parametrize("stream", [True, False])
def test_a_completed_reply_that_used_all_its_output_tokens_was_cut(server, stream):
    # llama.cpp's server reports "completed" for a reply stopped at max_output_tokens; the
    # count it reports against the limit asked for shows the cut, so continuations start.
    server.script(ResponsesReply.text("Cut o", usage=Usage(prompt=9, completion=8)),
                  ResponsesReply.text("Whole.", usage=Usage(prompt=9, completion=7)),
                  ResponsesReply.text("No limit asked.", usage=Usage(prompt=9, completion=8)))
    reasons = [client(server).complete(request(stream, max_tokens=limit)).finish_reason
               for limit in (8, 8, None)]
    assert reasons == ["length", "stop", "stop"]
    assert server.requests[0]["max_output_tokens"] == 8


@pytest.mark.parametrize("stream", [True, False])
def test_failed_response_is_a_model_behaviour_error(server, stream):
    server.script(ResponsesReply.failed("server_error", "The model broke."))
    with pytest.raises(ModelBehaviourError, match="failed: server_error: The model broke"):
        client(server).complete(request(stream))


def test_completed_event_without_output_is_rebuilt_from_the_items(server):
    server.script(ResponsesReply.function_calls([("lookup", '{"q":1}')], ids=["c9"],
                                                reasoning="r", empty_final_output=True))
    reply = client(server).complete(request(True))
    assert reply.message.tool_calls == (ToolCall(id="c9", name="lookup", arguments='{"q":1}'),)
    assert reply.message.reasoning == "r" and reply.finish_reason == "tool_calls"


def test_http_errors_are_mapped_with_rate_limits(server):
    server.script(ResponsesReply.error(429, "Rate limit reached", type="requests",
                                       code="rate_limit_exceeded",
                                       headers={"Retry-After": "7",
                                                "x-ratelimit-remaining-tokens": "0"}),
                  ResponsesReply.error(401, "Incorrect API key provided", code="invalid_api_key"))
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(request(True))
    err = caught.value
    assert (err.status, err.code, err.retry_after, err.provider, err.partial) == (
        429, "rate_limit_exceeded", 7.0, "fake", False)
    assert err.rate_limits == (("x-ratelimit-remaining-tokens", "0"),)
    assert "Rate limit reached" in err.body
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(request(False))
    assert (caught.value.status, caught.value.code) == (401, "invalid_api_key")


def test_error_event_mid_stream(server):
    server.script(ResponsesReply.stream_failure("rate_limit_exceeded", "Slow down",
                                                content="Partial"),
                  ResponsesReply.stream_failure("server_error", "Boom"))
    with pytest.raises(ProviderUnavailableError, match="Slow down") as caught:
        client(server).complete(request(True), on_delta=lambda _: None)
    assert (caught.value.code, caught.value.partial) == ("rate_limit_exceeded", True)
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(request(False))
    assert caught.value.status == 500


def test_dropped_stream_says_whether_text_reached_the_user(server):
    server.script(ResponsesReply.drop_stream(after_deltas=2), ResponsesReply.drop_stream(0),
                  ResponsesReply.drop_stream(1, clean_end=True), ResponsesReply.drop_stream())
    deltas: list[str] = []
    with pytest.raises(ProviderUnavailableError) as caught:
        client(server).complete(request(True), on_delta=deltas.append)
    assert caught.value.partial is True and deltas == ["Th", "is"]
    with pytest.raises(ProviderUnavailableError) as caught:
        client(server).complete(request(True))
    assert caught.value.partial is False
    with pytest.raises(ProviderUnavailableError, match="before the reply was") as caught:
        client(server).complete(request(True), on_delta=deltas.append)
    assert caught.value.partial is True
    with pytest.raises(ProviderUnavailableError):
        client(server).complete(request(False))


def test_timeout_and_garbage(server):
    server.script(ResponsesReply.hang(3), ResponsesReply.raw(200, b"{oops"),
                  ResponsesReply.raw(200, "event: response.created\ndata: {oops\n\n",
                                     content_type="text/event-stream"),
                  ResponsesReply.raw(200, b'{"status":"completed","output":[]}'))
    with pytest.raises(ProviderTimeoutError):
        client(server, timeout=0.5).complete(request(False))
    with pytest.raises(ModelBehaviourError, match="not JSON"):
        client(server).complete(request(False))
    with pytest.raises(ModelBehaviourError, match="not JSON"):
        client(server).complete(request(True))
    with pytest.raises(ModelBehaviourError, match="no output"):
        client(server).complete(request(False))


def test_credential_id_picks_the_key(server):
    server.script(ResponsesReply.text("a"), ResponsesReply.text("b"))
    adapter = client(server, keys={"pool-1": "sk-one", "pool-2": "sk-two"})
    adapter.complete(request(True, credential_id="pool-2"))
    adapter.complete(request(False))
    assert [h["authorization"] for h in server.request_headers] == ["Bearer sk-two", "Bearer k"]
    with pytest.raises(UsageError, match="pool-3") as caught:
        adapter.complete(request(True, credential_id="pool-3"))
    assert "sk-" not in str(caught.value)


# --- cancelling from another thread ---------------------------------------------------------

@pytest.mark.parametrize("gap", [0.1, 2.0], ids=["trickling", "silent"])
@pytest.mark.parametrize("stream", [True, False])
def test_cancel_aborts_the_response_in_flight(server, stream, gap):
    # The head goes out at once, then a piece every ``gap`` seconds (SSE events, or slices of
    # the JSON body): read to the end this takes far longer than the one second allowed. With
    # a 2 s gap the worker sits in a silent read when the cancel comes.
    server.script(ResponsesReply.text("slow " * 200, piece_size=1, chunk_delay=gap),
                  ResponsesReply.text("next"))
    shown: list[str] = []
    outcome, took = cancelled_after(server, lambda token: client(server, timeout=30.0).complete(
        request(stream), on_delta=shown.append, cancel=token))
    assert took < 1.0, f"the worker ran on {took:.2f} s after the cancel"
    assert len(outcome) == 1 and isinstance(outcome[0], ProviderUnavailableError), outcome
    assert len(shown) < 20
    # The shared client still serves the next request; a token never cancelled changes nothing.
    reply = client(server).complete(request(stream), cancel=CancelToken())
    assert reply.message.content == "next" and reply.streamed is stream


# --- the fake speaks the real protocol (the SDK's own typed client, strictly validated) -------

@pytest.mark.parametrize("reply", [
    ResponsesReply.text("Hi there.", reasoning="hmm"),
    ResponsesReply.function_calls([("lookup", '{"q": "x"}')], content="Checking."),
    ResponsesReply.incomplete("Cut", "max_output_tokens"),
    ResponsesReply.reasoning_only("plan")])
def test_the_fake_satisfies_the_sdk(server, reply):
    server.script(reply, reply)
    sdk = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5,
                        _strict_response_validation=True)
    plain = sdk.responses.create(model="m", input="hi", store=False)
    with sdk.responses.stream(model="m", input="hi", store=False) as events:
        seen = list(events)
    kinds = [event.type for event in seen]
    streamed = seen[-1].response  # the SDK helper's get_final_response wants response.completed
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == f"response.{plain.status}"
    assert [i.type for i in streamed.output] == [i.type for i in plain.output]
    assert streamed.output_text == plain.output_text == (reply.content or "")
