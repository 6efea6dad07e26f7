"""One contract suite for every ``ModelClient`` (DESIGN.md rule 11).

The same neutral scenarios run against each adapter and its loopback fake server: a small
per-adapter *scripter* turns a scenario (a text answer, tool calls, reasoning, usage, an HTTP
error, a dropped stream, a garbage body, a slow reply) into that fake's reply constructors, and
the assertions are written once, in the Protocol's terms. Only the fakes' public API is used.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from effects.protocols import CancelToken, ModelClient
from effects.providers.anthropic_messages import AnthropicMessagesClient
from effects.providers.openai_chat import OpenAIChatClient
from effects.providers.openai_responses import OpenAIResponsesClient
from stages.decision import ModelRequest
from stages.errors import (
    ModelBehaviourError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
    UsageError,
)
from stages.log.events import ModelReplied, Usage
from stages.log.messages import Message, ToolCall, canonical_json
from stages.log.tool_specs import ToolSpec
from tests import fake_anthropic, fake_openai, fake_responses
from tests.effects.cancelling import cancelled_after
from tests.fake_http import Stall

PIECE = 3  # characters per streamed text piece, on every fake
TEXT = "Hello, contract world: ünïcödé ✓ and a longer tail so that it streams in many pieces."
REASONING = "First I think, then I answer."
# (id, name, arguments as the provider sends them: spaced, unsorted, non-ASCII)
CALLS = (("call_a", "read_file", '{ "path" : "src/ä.py", "lines": [1, 2] }'),
         ("call_b", "grep", '{"pattern": "x", "flags": {"z": true, "a": null}}'))
SPEC = ToolSpec(name="read_file", description="Read a file.", parameters='{"type":"object"}')


@attrs.frozen
class NeutralUsage:
    """Token counts in mibyan's terms: ``uncached`` input excludes cache reads."""

    uncached: int = 100
    cache_read: int = 40
    output: int = 20
    reasoning: int = 5


USAGE = NeutralUsage()


# ---- scripters: neutral scenario -> one fake's replies -----------------------------------


class ChatScripter:
    reports_reasoning_tokens = True

    @staticmethod
    def usage(u: NeutralUsage) -> Any:
        return fake_openai.Usage(prompt=u.uncached + u.cache_read, completion=u.output,
                                 cached=u.cache_read, reasoning=u.reasoning)

    def text(self, content, *, reasoning=None, usage=None, truncated=False):
        return fake_openai.Reply.text(content, reasoning=reasoning,
                                      usage=usage and self.usage(usage),
                                      finish_reason="length" if truncated else "stop")

    def tool_calls(self, calls, *, content=None, usage=None):
        return fake_openai.Reply.tool_calls([(n, a) for _, n, a in calls], content,
                                            [i for i, _, _ in calls],
                                            usage=usage and self.usage(usage))

    def http_error(self, status, message, headers):
        return fake_openai.Reply.error(status, message, headers=headers)

    def raw(self, status, body, content_type, headers=None):
        return fake_openai.Reply.raw(status, body, content_type, headers=headers)

    def garbage_sse(self):
        return self.raw(200, "data: {not json\n\n", "text/event-stream")

    def drop(self, content, pieces):
        return fake_openai.Reply.drop_stream(after_chunks=pieces, content=content)

    def reasoning_only(self, reasoning):
        return fake_openai.Reply.text("", reasoning=reasoning)

    def unterminated_sse(self, deltas):
        """An SSE body that ends cleanly (no socket drop) before any finish_reason."""
        events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "finish_reason": None}]}]
        events += [{"choices": [{"index": 0, "delta": {"content": d}, "finish_reason": None}]}
                   for d in deltas]
        return self.raw(200, "".join(f"data: {json.dumps(e)}\n\n" for e in events),
                        "text/event-stream")

    def hang(self, seconds):
        return fake_openai.Reply.hang(seconds)

    def slow_text(self, content, gap):
        return fake_openai.Reply.text(content, piece_size=1, chunk_delay=gap)

    @staticmethod
    def key_sent(headers) -> str | None:
        auth = headers.get("authorization") or ""
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None

    @staticmethod
    def sent_arguments(body) -> list:
        """The arguments of every tool call in the history sent, parsed."""
        return [json.loads(c["function"]["arguments"]) for m in body["messages"]
                for c in m.get("tool_calls") or ()]


class ResponsesScripter(ChatScripter):

    def text(self, content, *, reasoning=None, usage=None, truncated=False):
        reply = fake_responses.ResponsesReply
        if truncated:
            return reply.incomplete(content, "max_output_tokens",
                                    usage=usage and self.usage(usage))
        return reply.text(content, reasoning=reasoning, usage=usage and self.usage(usage))

    def tool_calls(self, calls, *, content=None, usage=None):
        return fake_responses.ResponsesReply.function_calls(
            [(n, a) for _, n, a in calls], content=content, ids=[i for i, _, _ in calls],
            usage=usage and self.usage(usage))

    def http_error(self, status, message, headers):
        return fake_responses.ResponsesReply.error(status, message, headers=headers)

    def raw(self, status, body, content_type, headers=None):
        return fake_responses.ResponsesReply.raw(status, body, content_type, headers=headers)

    def garbage_sse(self):
        return self.raw(200, "event: response.created\ndata: {not json\n\n", "text/event-stream")

    def drop(self, content, pieces):
        return fake_responses.ResponsesReply.drop_stream(after_deltas=pieces, content=content)

    def reasoning_only(self, reasoning):
        return fake_responses.ResponsesReply.reasoning_only(reasoning)

    def unterminated_sse(self, deltas):
        events = [{"type": "response.created", "response": {"model": "contract-model"}},
                  {"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "message", "role": "assistant", "content": []}}]
        events += [{"type": "response.output_text.delta", "output_index": 0,
                    "content_index": 0, "delta": d} for d in deltas]
        return self.raw(200, "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
                                     for e in events), "text/event-stream")

    def hang(self, seconds):
        return fake_responses.ResponsesReply.hang(seconds)

    @staticmethod
    def sent_arguments(body) -> list:
        return [json.loads(i["arguments"]) for i in body["input"]
                if i["type"] == "function_call"]

    def slow_text(self, content, gap):
        return fake_responses.ResponsesReply.text(content, piece_size=1, chunk_delay=gap)


class AnthropicScripter:
    reports_reasoning_tokens = False  # thinking is counted inside output_tokens

    @staticmethod
    def usage(u: NeutralUsage) -> Any:
        return fake_anthropic.Usage(input=u.uncached, output=u.output, cache_read=u.cache_read)

    def text(self, content, *, reasoning=None, usage=None, truncated=False):
        return fake_anthropic.Reply.text(content, thinking=reasoning,
                                         usage=usage and self.usage(usage),
                                         stop_reason="max_tokens" if truncated else "end_turn")

    def tool_calls(self, calls, *, content=None, usage=None):
        return fake_anthropic.Reply.tool_use([(n, a) for _, n, a in calls], content,
                                             [i for i, _, _ in calls],
                                             usage=usage and self.usage(usage))

    def http_error(self, status, message, headers):
        return fake_anthropic.Reply.error(status, message, headers=headers)

    def raw(self, status, body, content_type, headers=None):
        return fake_anthropic.Reply.raw(status, body, content_type, headers=headers)

    def garbage_sse(self):
        return self.raw(200, "event: message_start\ndata: {not json\n\n", "text/event-stream")

    def drop(self, content, pieces):
        # message_start, then content_block_start and ping, then the text deltas.
        return fake_anthropic.Reply.drop_stream(after_events=2 + pieces, content=content)

    def reasoning_only(self, reasoning):
        return fake_anthropic.Reply.text("", thinking=reasoning)

    def unterminated_sse(self, deltas):
        events = [{"type": "message_start", "message": {
                      "id": "msg_x", "type": "message", "role": "assistant", "content": [],
                      "model": "contract-model", "stop_reason": None,
                      "usage": {"input_tokens": 1, "output_tokens": 1}}},
                  {"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}]
        events += [{"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": d}} for d in deltas]
        return self.raw(200, "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
                                     for e in events), "text/event-stream")

    def hang(self, seconds):
        return fake_anthropic.Reply.hang(seconds)

    def slow_text(self, content, gap):
        return fake_anthropic.Reply.text(content, piece_size=1, chunk_delay=gap)

    @staticmethod
    def key_sent(headers) -> str | None:
        assert "authorization" not in headers, "Anthropic takes the key in x-api-key only"
        return headers.get("x-api-key")

    @staticmethod
    def sent_arguments(body) -> list:
        return [b["input"] for m in body["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b["type"] == "tool_use"]


# ---- the fixture: one adapter, its fake server and its scripter ---------------------------


@attrs.define
class Adapter:
    server: Any
    script: Any  # a scripter
    make: Callable[..., ModelClient]
    provider: str

    def client(self, *, timeout: float = 10.0, keys=None, api_key: str = "default-key",
               deadline: float | None = None, base_url: str | None = None):
        return self.make(base_url=base_url or self.server.base_url, api_key=api_key,
                         provider=self.provider, timeout=timeout, keys=keys, deadline=deadline)

    def queue(self, *replies: Any) -> None:
        self.server.script(*replies)


COMBOS = {
    "openai_chat": (OpenAIChatClient, fake_openai.FakeOpenAIServer, ChatScripter),
    "openai_responses": (OpenAIResponsesClient, fake_responses.FakeResponsesServer,
                         ResponsesScripter),
    "anthropic_messages": (AnthropicMessagesClient, fake_anthropic.FakeAnthropicServer,
                           AnthropicScripter),
}


# Known departures from the contract: test name -> {adapter: why it fails}. Each becomes a
# strict xfail on that adapter's parameter, so the suite turns red the day the adapter changes.
KNOWN_INCONSISTENCIES: dict[str, dict[str, str]] = {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "adapter_name" not in metafunc.fixturenames:
        return
    known = KNOWN_INCONSISTENCIES.get(metafunc.function.__name__, {})
    metafunc.parametrize("adapter_name", [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=known[name]))
        if name in known else name for name in COMBOS])


@pytest.fixture
def adapter(adapter_name: str) -> Iterator[Adapter]:
    make, server_class, scripter = COMBOS[adapter_name]
    with server_class(piece_size=PIECE) as server:
        yield Adapter(server=server, script=scripter(), make=make,
                      provider=f"contract-{adapter_name}")
        server.assert_done()


def req(stream: bool, *, credential_id: str | None = None) -> ModelRequest:
    return ModelRequest(model="contract-model", provider="contract", api_mode="any",
                        purpose="step", system_prompt="Be brief.",
                        messages=(Message(role="user", content="Say something."),),
                        tools=(SPEC,), stream=stream, credential_id=credential_id)


def complete(adapter: Adapter, stream: bool, **kw) -> tuple[ModelReplied, list[str]]:
    deltas: list[str] = []
    reply = adapter.client().complete(req(stream), on_delta=deltas.append, **kw)
    assert bool(adapter.server.requests[-1].get("stream")) is stream
    return reply, deltas


def failure(adapter: Adapter, stream: bool, error: type[BaseException] = ProviderError,
            on_delta: Any = ...) -> tuple[Any, list[str]]:
    deltas: list[str] = []
    sink = deltas.append if on_delta is ... else on_delta
    with pytest.raises(error) as caught:
        adapter.client().complete(req(stream), on_delta=sink)
    return caught.value, deltas


# ---- what "plain data" means -------------------------------------------------------------

_LEAVES = (str, int, float, bool, type(None))


def assert_plain(value: Any, where: str = "reply") -> None:
    """Every field, recursively, is str/int/float/bool/None, a tuple, or a project attrs
    class (exact types: an SDK subclass of str or int would not pass)."""
    kind = type(value)
    if kind in _LEAVES:
        return
    if kind is tuple:
        for i, item in enumerate(value):
            assert_plain(item, f"{where}[{i}]")
        return
    assert attrs.has(kind) and kind.__module__.startswith("stages."), (
        f"{where} is a {kind.__module__}.{kind.__qualname__}, not plain data")
    for field in attrs.fields(kind):
        assert_plain(getattr(value, field.name), f"{where}.{field.name}")


def assert_plain_error(error: ProviderError) -> None:
    for name in ("status", "body", "code", "retry_after", "provider", "rate_limits", "partial"):
        assert_plain(getattr(error, name), f"error.{name}")


def assert_reply_shape(reply: Any, stream: bool) -> None:
    assert type(reply) is ModelReplied
    assert type(reply.message) is Message and reply.message.role == "assistant"
    assert type(reply.usage) is Usage
    assert reply.streamed is stream
    assert reply.model == "contract-model" and reply.latency_ms >= 0
    assert_plain(reply)


# ---- scenarios ---------------------------------------------------------------------------

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])


@STREAM
def test_text_answer_is_an_assistant_message_with_finish_stop(adapter, stream):
    adapter.queue(adapter.script.text(TEXT))
    reply, deltas = complete(adapter, stream)
    assert_reply_shape(reply, stream)
    assert reply.message == Message(role="assistant", content=TEXT)
    assert reply.finish_reason == "stop"
    if stream:
        assert "".join(deltas) == TEXT and len(deltas) > 1
        assert all(type(d) is str and d for d in deltas)
    else:
        assert deltas == []


def test_text_is_assembled_the_same_streamed_or_not(adapter):
    adapter.queue(adapter.script.text(TEXT, reasoning=REASONING, usage=USAGE),
                  adapter.script.text(TEXT, reasoning=REASONING, usage=USAGE))
    streamed, _ = complete(adapter, True)
    whole, _ = complete(adapter, False)
    assert streamed.message == whole.message
    assert (streamed.finish_reason, streamed.usage) == (whole.finish_reason, whole.usage)


@STREAM
def test_reasoning_is_kept_apart_from_the_text(adapter, stream):
    adapter.queue(adapter.script.text(TEXT, reasoning=REASONING))
    reply, deltas = complete(adapter, stream)
    assert_reply_shape(reply, stream)
    assert (reply.message.content, reply.message.reasoning) == (TEXT, REASONING)
    assert reply.finish_reason == "stop"
    assert "".join(deltas) == (TEXT if stream else "")  # reasoning never reaches on_delta


@STREAM
@pytest.mark.parametrize("content", [None, "Let me look."], ids=["calls_only", "with_text"])
def test_tool_calls_come_back_in_order_with_canonical_arguments(adapter, stream, content):
    adapter.queue(adapter.script.tool_calls(CALLS, content=content))
    reply, deltas = complete(adapter, stream)
    assert_reply_shape(reply, stream)
    assert reply.message.tool_calls == tuple(
        ToolCall(id=i, name=n, arguments=canonical_json(json.loads(a))) for i, n, a in CALLS)
    assert reply.message.content == content
    assert reply.finish_reason == "tool_calls"
    assert "".join(deltas) == (content or "" if stream else "")


@STREAM
def test_reasoning_only_reply_is_incomplete(adapter, stream):
    adapter.queue(adapter.script.reasoning_only(REASONING))
    reply, deltas = complete(adapter, stream)
    assert_reply_shape(reply, stream)
    # Provider-issued parts (signed thinking, encrypted items) ride along; see test_reasoning_*.
    plain = attrs.evolve(reply.message, reasoning_parts=())
    assert plain == Message(role="assistant", content="", reasoning=REASONING)
    assert deltas == []
    assert reply.finish_reason == "incomplete"


@STREAM
def test_truncated_answer_has_finish_length(adapter, stream):
    adapter.queue(adapter.script.text(TEXT, truncated=True))
    reply, _ = complete(adapter, stream)
    assert_reply_shape(reply, stream)
    assert (reply.message.content, reply.finish_reason) == (TEXT, "length")


@STREAM
def test_usage_is_normalised(adapter, stream):
    adapter.queue(adapter.script.text(TEXT, usage=USAGE))
    reply, _ = complete(adapter, stream)
    usage = reply.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
            usage.output_tokens) == (USAGE.uncached, USAGE.cache_read, 0, USAGE.output)
    assert usage.total_tokens == USAGE.uncached + USAGE.cache_read + USAGE.output
    assert usage.as_dict()["total_tokens"] == usage.total_tokens
    assert usage.reasoning_tokens == (USAGE.reasoning if adapter.script.reports_reasoning_tokens
                                      else 0)
    assert usage.reasoning_tokens <= usage.output_tokens


@STREAM
@pytest.mark.parametrize("status, retry_after, expected", [
    (429, "7", 7.0), (529, "1.5", 1.5), (400, None, None)])
def test_http_error_is_a_provider_http_error(adapter, stream, status, retry_after, expected):
    headers = {"x-ratelimit-remaining-requests": "0"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    adapter.queue(adapter.script.http_error(status, "Nope, says the provider", headers))
    error, deltas = failure(adapter, stream, ProviderHTTPError)
    assert (error.status, error.retry_after, error.provider) == (status, expected,
                                                                 adapter.provider)
    assert error.partial is False and deltas == []
    assert "Nope, says the provider" in error.body
    assert ("x-ratelimit-remaining-requests", "0") in error.rate_limits
    assert_plain_error(error)


def test_rate_limit_headers_are_kept_in_the_order_sent(adapter):
    headers = {"X-RateLimit-Remaining-Tokens": "5", "x-ratelimit-limit-requests": "10"}
    adapter.queue(adapter.script.http_error(429, "slow down", headers))
    error, _ = failure(adapter, True, ProviderHTTPError)
    assert error.rate_limits == (("x-ratelimit-remaining-tokens", "5"),
                                 ("x-ratelimit-limit-requests", "10"))


@STREAM
def test_an_html_error_page_is_a_provider_http_error(adapter, stream):
    adapter.queue(adapter.script.raw(502, "<html>Bad gateway</html>", "text/html"))
    error, _ = failure(adapter, stream, ProviderHTTPError)
    assert (error.status, error.provider, error.partial) == (502, adapter.provider, False)
    assert_plain_error(error)


@pytest.mark.parametrize("pieces", [0, 2], ids=["before_text", "after_text"])
def test_dropped_stream_is_partial_once_text_was_streamed(adapter, pieces):
    adapter.queue(adapter.script.drop(TEXT, pieces))
    error, deltas = failure(adapter, True)
    assert "".join(deltas) == TEXT[:PIECE * pieces]
    assert error.partial is (pieces > 0)
    assert error.provider == adapter.provider
    assert_plain_error(error)


def test_dropped_stream_without_a_sink_is_not_partial(adapter):
    """Nothing reached a user when there is no ``on_delta``: the call may be re-issued."""
    adapter.queue(adapter.script.drop(TEXT, 2))
    error, _ = failure(adapter, True, on_delta=None)
    assert error.partial is False


@pytest.mark.parametrize("deltas", [(), ("Hel", "lo")], ids=["before_text", "after_text"])
def test_stream_ending_cleanly_without_a_finish_is_a_provider_error(adapter, deltas):
    adapter.queue(adapter.script.unterminated_sse(list(deltas)))
    error, shown = failure(adapter, True)
    assert (shown, error.partial, error.provider) == (list(deltas), bool(deltas),
                                                      adapter.provider)
    assert_plain_error(error)


def test_a_server_that_does_not_answer_in_time_is_a_provider_error(adapter):
    adapter.queue(adapter.script.hang(3))
    deltas: list[str] = []
    started = time.perf_counter()
    with pytest.raises(ProviderError) as caught:
        adapter.client(timeout=0.2).complete(req(True), on_delta=deltas.append)
    assert time.perf_counter() - started < 2.0  # the reply would come after 3 s
    assert (caught.value.partial, caught.value.provider, deltas) == (False, adapter.provider, [])
    assert_plain_error(caught.value)


def test_connection_closed_before_any_response_is_not_partial(adapter):
    adapter.queue(adapter.script.drop(TEXT, 0))
    error, deltas = failure(adapter, False)
    assert (error.partial, error.provider, deltas) == (False, adapter.provider, [])
    assert_plain_error(error)


@STREAM
@pytest.mark.parametrize("body", ["{not json", "[1, 2]", '{"unexpected": true}', ""],
                         ids=["broken", "array", "wrong_object", "empty"])
def test_garbage_body_is_a_model_behaviour_error(adapter, stream, body):
    adapter.queue(adapter.script.raw(200, body, "application/json"))
    error, deltas = failure(adapter, stream, ModelBehaviourError)
    assert deltas == [] and not isinstance(error, ProviderError)


def test_garbage_sse_event_is_a_model_behaviour_error(adapter):
    adapter.queue(adapter.script.garbage_sse())
    failure(adapter, True, ModelBehaviourError)


def cancel_adapter_call(adapter: Adapter, stream: bool, seconds: float = 0.15):
    """The worker's outcome, the deltas it showed and how long it ran after the cancel."""
    deltas: list[str] = []
    outcome, took = cancelled_after(adapter.server, lambda token: adapter.client(
        timeout=30.0).complete(req(stream), on_delta=deltas.append, cancel=token), seconds)
    return outcome, deltas, took


@STREAM
def test_cancel_mid_response_ends_complete_promptly_with_an_error(adapter, stream):
    adapter.queue(adapter.script.slow_text("slow " * 200, gap=0.05), adapter.script.text("next"))
    outcome, deltas, took = cancel_adapter_call(adapter, stream)
    assert took < 1.0, f"complete() ran on {took:.2f} s after the cancel"
    assert len(outcome) == 1 and isinstance(outcome[0], ProviderError), outcome
    assert outcome[0].partial is bool(deltas)
    assert_plain_error(outcome[0])
    assert len("".join(deltas)) < len("slow " * 200)
    # The shared SDK client still serves the next call, and an unused token changes nothing.
    reply = adapter.client().complete(req(stream), cancel=CancelToken())
    assert reply.message.content == "next"


@STREAM
def test_cancel_before_the_response_head_closes_the_connection(adapter, stream):
    """The server is still working on the reply (no head yet): the interrupt must reach it as
    a closed connection, or it goes on generating for nobody."""
    adapter.queue(adapter.script.hang(30))
    token, outcome = CancelToken(), []

    def work() -> None:
        try:
            outcome.append(adapter.client(timeout=30.0).complete(req(stream), cancel=token))
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    deadline = time.perf_counter() + 10.0
    while not adapter.server.requests and time.perf_counter() < deadline:
        time.sleep(0.01)
    token.cancel()
    worker.join(5.0)
    assert not worker.is_alive(), "complete() still waits for the head after the cancel"
    assert len(outcome) == 1 and isinstance(outcome[0], ProviderError), outcome
    assert "interrupted" in str(outcome[0]) and outcome[0].partial is False
    assert adapter.server.wait_for_disconnect(5.0), "the server never saw the connection close"


@STREAM
def test_keep_alive_bytes_forever_time_out_at_the_total_deadline(adapter, stream):
    """Each byte resets a read timeout; only the total deadline ends such a call."""
    adapter.queue(Stall(interval=0.05, seconds=30.0))
    with pytest.raises(ProviderTimeoutError) as caught:
        adapter.client(timeout=0.3, deadline=0.5).complete(req(stream))
    assert "total deadline of 0.5 s" in str(caught.value)
    assert (caught.value.provider, caught.value.partial) == (adapter.provider, False)
    assert adapter.server.wait_for_disconnect(5.0), "the stall ended by itself, not by the client"
    assert_plain_error(caught.value)


@STREAM
def test_a_session_keeps_one_connection_alive(adapter, stream):
    adapter.queue(*(adapter.script.text(TEXT) for _ in range(11)))
    client = adapter.client()
    for _ in range(11):
        assert client.complete(req(stream)).message.content == TEXT
    assert adapter.server.connections == 1


def test_keys_are_request_headers_on_one_connection_pool(adapter):
    adapter.queue(*(adapter.script.text("ok") for _ in range(3)))
    client = adapter.client(keys={"a": "key-a", "b": "key-b"})
    for credential_id in ("a", None, "b"):
        client.complete(req(False, credential_id=credential_id))
    assert adapter.server.connections == 1
    sent = [adapter.script.key_sent(h) for h in adapter.server.request_headers]
    assert sent == ["key-a", "default-key", "key-b"]


@pytest.mark.parametrize("timeout, deadline", [(-1, None), (0, None), (float("nan"), None),
                                               (5.0, 0), (5.0, -2.0), ("5", None)])
def test_a_timeout_or_deadline_that_is_not_positive_is_a_usage_error(adapter, timeout, deadline):
    with pytest.raises(UsageError, match="timeout|deadline"):
        adapter.client(timeout=timeout, deadline=deadline)


def test_a_base_url_without_a_scheme_is_a_usage_error(adapter):
    with pytest.raises(UsageError, match="http"):
        adapter.client(base_url=f"127.0.0.1:{adapter.server.port}/v1")


# Error bodies as real servers send them: (body, content type, what the message must show).
ERROR_BODIES = {
    "integer_code": ('{"error": {"code": 500, "message": "Context size has been exceeded.", '
                     '"type": "server_error"}}', "application/json", "Context size"),
    "null_code": ('{"error": {"message": "Bad things", "type": "invalid_request_error", '
                  '"code": null}}', "application/json", "Bad things"),
    "nested": ('{"error": {"error": {"message": "Upstream said no", "code": 429}}}',
               "application/json", "Upstream said no"),
    "html": ("<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html", "Bad Gateway"),
    "plain_text": ("upstream connect error or disconnect", "text/plain", "upstream connect"),
}


@STREAM
@pytest.mark.parametrize("shape", ERROR_BODIES)
def test_an_error_body_of_any_shape_is_plain_data_naming_the_endpoint(adapter, stream, shape):
    body, content_type, shown = ERROR_BODIES[shape]
    adapter.queue(adapter.script.raw(500, body, content_type))
    error, _ = failure(adapter, stream, ProviderHTTPError)
    assert_plain_error(error)
    assert error.code is None or type(error.code) is str
    assert shown in str(error) and error.body == body
    assert adapter.provider in str(error)
    assert f"127.0.0.1:{adapter.server.port}" in str(error) and error.endpoint in str(error)


@STREAM
def test_a_redirect_is_an_http_error_naming_where_it_points(adapter, stream):
    """Redirects are not followed (a key header would go along to another host)."""
    adapter.queue(adapter.script.raw(308, "", "text/plain",
                                     headers={"Location": "https://elsewhere.example/v1?k=1"}))
    error, _ = failure(adapter, stream, ProviderHTTPError)
    assert error.status == 308 and "https://elsewhere.example/v1;" in str(error)
    assert_plain_error(error)


def test_an_integer_code_reaches_the_project_as_text(adapter):
    body = '{"error": {"code": 503, "message": "Loading model", "type": 503}}'
    adapter.queue(adapter.script.raw(503, body, "application/json"))
    error, _ = failure(adapter, False, ProviderHTTPError)
    assert error.code == "503"


def test_credentials_in_the_base_url_never_reach_an_error(adapter):
    adapter.queue(adapter.script.http_error(400, "no", {}))
    base_url = adapter.server.base_url.replace("http://", "http://user:s3cret@")
    with pytest.raises(ProviderHTTPError) as caught:
        adapter.client(base_url=base_url).complete(req(False))
    assert "s3cret" not in str(caught.value) and "s3cret" not in caught.value.endpoint


@pytest.mark.parametrize("headers, expected", [
    ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past: no wait
    ({"retry-after-ms": "1500", "Retry-After": "9"}, 1.5),
    ({"Retry-After": "soon"}, None)])
def test_retry_after_in_every_form(adapter, headers, expected):
    adapter.queue(adapter.script.http_error(429, "slow down", headers))
    error, _ = failure(adapter, False, ProviderHTTPError)
    assert error.retry_after == expected


def test_retry_after_as_an_http_date_is_honoured(adapter):
    later = email.utils.formatdate(time.time() + 3600, usegmt=True)
    adapter.queue(adapter.script.http_error(429, "slow down", {"Retry-After": later}))
    error, _ = failure(adapter, False, ProviderHTTPError)
    assert 3500 < error.retry_after <= 3600


BROKEN = ("{", '{"city', "[1, 2]", '"text"', "")


@STREAM
def test_history_is_sent_with_json_object_arguments_only(adapter, stream):
    """A call cut off by max_tokens stays in history; a server rejects every later request
    carrying its broken arguments, so they are sent as ``{}``."""
    good = ToolCall(id="call_ok", name="read_file", arguments='{"city":"Paris"}')
    history = [Message(role="user", content="Weather?")]
    for n, broken in enumerate(BROKEN):
        call = ToolCall(id=f"call_{n}", name="read_file", arguments=broken)
        history += [Message(role="assistant", content=None, tool_calls=(call, good)),
                    Message(role="tool", content="refused", tool_call_id=call.id),
                    Message(role="tool", content="sunny", tool_call_id=good.id)]
    history.append(Message(role="user", content="And now?"))
    request = attrs.evolve(req(stream), messages=tuple(history))
    adapter.queue(adapter.script.text("ok"))
    adapter.client().complete(request)
    sent = adapter.script.sent_arguments(adapter.server.requests[-1])
    assert sent == [{}, {"city": "Paris"}] * len(BROKEN)


def test_credential_id_picks_the_key_from_keys(adapter):
    keys = {"work": "work-key", "home": "home-key"}
    adapter.queue(*(adapter.script.text("ok") for _ in range(3)))
    client = adapter.client(keys=keys)
    for credential_id in ("work", None, "home"):
        reply = client.complete(req(True, credential_id=credential_id))
        assert reply.message.content == "ok"
    sent = [adapter.script.key_sent(h) for h in adapter.server.request_headers]
    assert sent == ["work-key", "default-key", "home-key"]


def test_keys_are_read_when_the_call_is_made(adapter):
    keys = {"work": "old-key"}
    client = adapter.client(keys=keys)
    keys["work"] = "refreshed-key"
    adapter.queue(adapter.script.text("ok"))
    client.complete(req(True, credential_id="work"))
    assert adapter.script.key_sent(adapter.server.request_headers[-1]) == "refreshed-key"


def test_an_unknown_credential_id_is_a_usage_error_and_sends_nothing(adapter):
    client = adapter.client(keys={"work": "work-key"})
    with pytest.raises(UsageError):
        client.complete(req(True, credential_id="nope"))
    with pytest.raises(UsageError):
        adapter.client().complete(req(False, credential_id="work"))  # no keys at all
    assert adapter.server.requests == []
