"""The Anthropic Messages adapter: history conversion (pure) and the fake server (real HTTP)."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effects.protocols import CancelToken
from effects.providers.anthropic_messages import AnthropicMessagesClient, request_body, to_anthropic
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
from tests.fake_anthropic import FakeAnthropicServer, Reply, Usage

SPEC = ToolSpec(name="lookup", description="Look up.", parameters='{"type":"object"}')
EPHEMERAL = {"type": "ephemeral"}


def user(text: str) -> Message:
    return Message(role="user", content=text)


def calls(*ids: str, content: str | None = None, arguments: str = '{"q":"x"}') -> Message:
    return Message(role="assistant", content=content, reasoning="private thoughts",
                   tool_calls=tuple(ToolCall(id=i, name="lookup", arguments=arguments)
                                    for i in ids))


def result(call_id: str, text: str = "found") -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name="lookup")


def req(*messages: Message, stream: bool = False, **kw) -> ModelRequest:
    kw.setdefault("system_prompt", "be brief")
    kw.setdefault("model", "claude-x")
    return ModelRequest(provider="anthropic", api_mode="anthropic_messages",
                        purpose="step", messages=messages, tools=(SPEC,), stream=stream, **kw)


def blocks(content) -> list[tuple]:
    """A compact view of an Anthropic content list."""
    out = []
    for b in content:
        if b["type"] == "text":
            out.append(("text", b["text"]))
        elif b["type"] == "tool_use":
            out.append(("tool_use", b["id"], b["input"]))
        else:
            out.append(("tool_result", b["tool_use_id"], b["content"], b.get("is_error", False)))
    return out


# ---- conversion ---------------------------------------------------------------------------


def test_system_tools_and_defaults():
    body = to_anthropic(req(user("hi")))
    assert body["system"] == [{"type": "text", "text": "be brief"}]
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["tools"] == [{"name": "lookup", "description": "Look up.",
                              "input_schema": {"type": "object"}}]
    assert body["max_tokens"] == 4096 and "tool_choice" not in body and "stream" not in body
    assert "system" not in to_anthropic(req(user("hi"), system_prompt=None))
    assert to_anthropic(req(user("hi"), max_tokens=50, stream=True))["max_tokens"] == 50


def test_tool_results_merge_into_one_user_turn_with_the_following_text():
    body = to_anthropic(req(user("q"), calls("a", "b", content="Let me look."),
                            result("a"), result("b", "other"), user("and now?")))
    assistant, turn = body["messages"][1:]
    assert assistant["role"] == "assistant"
    assert blocks(assistant["content"]) == [("text", "Let me look."), ("tool_use", "a", {"q": "x"}),
                                            ("tool_use", "b", {"q": "x"})]
    assert turn["role"] == "user" and len(body["messages"]) == 3
    assert blocks(turn["content"]) == [("tool_result", "a", "found", False),
                                       ("tool_result", "b", "other", False), ("text", "and now?")]


def test_reasoning_is_not_sent_back_and_bad_arguments_become_empty_input():
    body = to_anthropic(req(user("q"), calls("a", arguments="{not json"), result("a")))
    assert "private thoughts" not in str(body)
    assert blocks(body["messages"][1]["content"]) == [("tool_use", "a", {})]


def test_orphan_tool_results_are_dropped():
    body = to_anthropic(req(user("q"), result("ghost"), calls("a"), result("a"), result("zzz"),
                            Message(role="assistant", content="done")))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant"]
    assert body["messages"][0]["content"] == "q"
    assert blocks(body["messages"][2]["content"]) == [("tool_result", "a", "found", False)]


def test_tool_use_without_result_gets_a_stub_error_result():
    body = to_anthropic(req(user("q"), calls("a", "b"), result("b"), user("hm")))
    assert blocks(body["messages"][2]["content"]) == [
        ("tool_result", "b", "found", False), ("tool_result", "a", "(tool result missing)", True),
        ("text", "hm")]
    last = to_anthropic(req(user("q"), calls("c")))["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert blocks(last[2]["content"]) == [("tool_result", "c", "(tool result missing)", True)]


def test_same_roles_merge_and_ids_are_sanitised():
    body = to_anthropic(req(user("one"), user("two"), calls("fn.lookup:0"), result("fn.lookup:0"),
                            Message(role="assistant", content="")))
    assert blocks(body["messages"][0]["content"]) == [("text", "one"), ("text", "two")]
    assert body["messages"][1]["content"][0]["id"] == "fn_lookup_0"
    assert body["messages"][2]["content"][0]["tool_use_id"] == "fn_lookup_0"
    assert body["messages"][3]["content"] == "(empty)"


def test_cache_marks_on_string_and_list_content_and_system():
    history = (user("q"), calls("a"), result("a"), user("more"))
    body = to_anthropic(req(*history, cache_marks=(-1, 0, 2)))
    assert body["system"][0]["cache_control"] == EPHEMERAL
    assert body["messages"][0]["content"] == [{"type": "text", "text": "q",
                                               "cache_control": EPHEMERAL}]
    turn = body["messages"][2]["content"]  # tool result + "more": mark on the tool's block
    assert turn[0]["cache_control"] == EPHEMERAL and "cache_control" not in turn[1]
    body = to_anthropic(req(*history, cache_marks=(1, 3), cache_ttl="1h"))
    one_hour = {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][1]["content"][-1]["cache_control"] == one_hour
    assert body["messages"][2]["content"][-1] == {"type": "text", "text": "more",
                                                 "cache_control": one_hour}
    assert "cache_control" not in str(to_anthropic(req(*history)))


def test_a_mark_on_a_dropped_message_moves_to_the_block_before_it():
    body = to_anthropic(req(user("q"), result("ghost"), cache_marks=(1,)))
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "q", "cache_control": EPHEMERAL}]}]
    with pytest.raises(UsageError):
        to_anthropic(req(user("q"), cache_marks=(5,)))


@pytest.mark.parametrize("choice, expected", [
    (None, None), ("auto", {"type": "auto"}), ("none", {"type": "none"}),
    ("required", {"type": "any"}), ("lookup", {"type": "tool", "name": "lookup"})])
def test_tool_choice_mapping(choice, expected):
    assert to_anthropic(req(user("q"), tool_choice=choice)).get("tool_choice") == expected


def test_reasoning_effort_enables_thinking_only_at_the_start_of_a_turn():
    body = to_anthropic(req(user("q"), reasoning_effort="medium"))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8000}
    assert body["max_tokens"] == 8000 + 4096
    assert "thinking" not in to_anthropic(req(user("q"), calls("a"), result("a"),
                                              reasoning_effort="high"))
    assert "thinking" not in to_anthropic(req(user("q"), reasoning_effort="none"))
    capped = to_anthropic(req(user("q"), reasoning_effort="high", max_tokens=2000))
    assert capped["thinking"]["budget_tokens"] == 1500 and capped["max_tokens"] == 2000
    assert "thinking" not in to_anthropic(req(user("q"), reasoning_effort="low", max_tokens=900))
    with pytest.raises(UsageError):
        to_anthropic(req(user("q"), reasoning_effort="extreme"))


def test_a_capped_thinking_budget_leaves_a_quarter_of_max_tokens_to_the_answer(caplog):
    # It used to be max_tokens - 1: one token left for the answer.
    for limit, budget in ((2000, 1500), (1366, 1024), (40_000, 16_000)):
        body = to_anthropic(req(user("q"), reasoning_effort="high", max_tokens=limit))
        assert body["thinking"]["budget_tokens"] == budget and body["max_tokens"] == limit
        assert limit - budget >= limit // 4
    with caplog.at_level(logging.WARNING, logger="effects.providers.anthropic_thinking"):
        for _ in range(2):
            body = to_anthropic(req(user("q"), reasoning_effort="high", max_tokens=1365,
                                    model="claude-no-room"))
    assert "thinking" not in body and body["max_tokens"] == 1365
    said = [r.getMessage() for r in caplog.records if "anthropic_thinking_not_sent" in
            r.getMessage()]
    assert len(said) == 1 and "1366" in said[0] and "claude-no-room" in said[0]


def test_system_messages_in_the_history_join_the_system_blocks():
    body = to_anthropic(req(Message(role="system", content="note"), user("q"), cache_marks=(0,)))
    assert body["system"] == [{"type": "text", "text": "be brief"},
                              {"type": "text", "text": "note", "cache_control": EPHEMERAL}]
    assert body["messages"] == [{"role": "user", "content": "q"}]


_ids = st.sampled_from(["a", "b", "c"])
_message = st.one_of(
    st.builds(user, st.sampled_from(["x", "", " "])),
    st.builds(lambda ids, text: calls(*ids, content=text),
              st.lists(_ids, max_size=3), st.sampled_from([None, "", "t"])),
    st.builds(result, st.sampled_from(["a", "b", "c", "zz"])),
    st.just(Message(role="system", content="s")))


@settings(max_examples=150, deadline=None)
@given(st.lists(_message, max_size=10), st.data())
def test_any_history_converts_to_a_valid_alternation(history, data):
    marks = data.draw(st.lists(st.integers(-1, len(history) - 1), max_size=4, unique=True))
    body = to_anthropic(req(*history, cache_marks=tuple(marks)))
    roles = [m["role"] for m in body["messages"]]
    assert all(x != y for x, y in zip(roles, roles[1:]))
    pending: list[str] = []
    for m in body["messages"]:
        content = m["content"] if isinstance(m["content"], list) else [_text_block(m)]
        assert all(b["text"].strip() for b in content if b["type"] == "text")
        if m["role"] == "user":  # exactly the previous tool_use ids are answered, first
            kinds = [b["type"] for b in content]
            assert kinds == sorted(kinds, key=lambda k: k != "tool_result")
            answered = [b["tool_use_id"] for b in content if b["type"] == "tool_result"]
            assert sorted(answered) == sorted(pending)
            pending = []
        else:
            assert not pending
            pending = [b["id"] for b in content if b["type"] == "tool_use"]
            assert len(set(pending)) == len(pending)
    assert not pending
    placed = str(body).count("cache_control")
    assert placed <= len(marks)
    assert json.loads(request_body(req(*history, cache_marks=tuple(marks)))) == body


def test_equal_messages_twice_get_a_cache_mark_only_where_marked():
    """Blocks are cached per message; two equal messages must not share a mark."""
    history = (user("go on"), calls("a"), result("a"), user("go on"))
    request = req(*history, cache_marks=(3,))
    for body in (to_anthropic(request), json.loads(request_body(request))):
        assert str(body).count("cache_control") == 1
        assert body["messages"][0] == {"role": "user", "content": "go on"}


def test_the_body_bytes_are_the_converted_request():
    request = req(user("q"), calls("a", "b", content="Let me look."), result("a"),
                  Message(role="system", content="note"), user("ü ✓"), stream=True,
                  cache_marks=(-1, 1, 4), tool_choice="lookup", max_tokens=99)
    assert json.loads(request_body(request)) == to_anthropic(request)


def _text_block(message: dict) -> dict:
    return {"type": "text", "text": message["content"]}


# ---- HTTP against the fake server ---------------------------------------------------------


@pytest.fixture(scope="module")
def shared_server():
    # One server for the module: SDK clients (one per base URL and key) are then reused.
    with FakeAnthropicServer(piece_size=2) as srv:
        yield srv


@pytest.fixture
def server(shared_server):
    shared_server.reset()
    yield shared_server
    shared_server.assert_done()


def client(server, timeout: float = 5.0, **kw) -> AnthropicMessagesClient:
    return AnthropicMessagesClient(base_url=server.base_url, api_key="sk-main", provider="anth",
                                   timeout=timeout, **kw)


LIMITS = {"anthropic-ratelimit-requests-remaining": "49", "x-ratelimit-limit-tokens": "8000"}


@pytest.mark.parametrize("stream", [True, False])
def test_text_reply_with_thinking_usage_and_rate_limits(server, stream):
    server.script(Reply.text("Hello there, friend.", thinking="consider", headers=LIMITS,
                             usage=Usage(input=12, output=30, cache_read=500, cache_write=40)))
    deltas: list[str] = []
    reply = client(server).complete(req(user("hi"), stream=stream), on_delta=deltas.append)
    assert reply.message.content == "Hello there, friend." and reply.message.reasoning == "consider"
    assert reply.finish_reason == "stop" and reply.streamed is stream
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cache_read_tokens,
            reply.usage.cache_write_tokens) == (12, 30, 500, 40)
    assert reply.rate_limits == tuple(LIMITS.items())
    assert ("".join(deltas) == "Hello there, friend." and len(deltas) > 1) if stream else not deltas
    headers = server.request_headers[0]
    assert headers["x-api-key"] == "sk-main" and "authorization" not in headers
    assert headers["anthropic-version"] and server.last_request.get("stream", False) is stream


@pytest.mark.parametrize("stream", [True, False])
def test_thinking_is_said_to_be_counted_in_the_output_not_claimed_as_zero(server, stream):
    # Anthropic counts thinking inside output_tokens and reports no count of its own.
    server.script(Reply.text("Yes.", thinking="consider", usage=Usage(input=5, output=30)),
                  Reply.text("No.", usage=Usage(input=5, output=2)))
    thought, plain = (client(server).complete(req(user("hi"), stream=stream)).usage
                      for _ in range(2))
    assert thought.reasoning_in_output and thought.output_tokens == 30
    assert thought.as_dict()["reasoning_tokens"] is None
    assert not plain.reasoning_in_output and plain.as_dict()["reasoning_tokens"] == 0
    assert (thought + plain).reasoning_in_output


@pytest.mark.parametrize("stream", [True, False])
def test_tool_use_reply(server, stream):
    server.script(Reply.tool_use([("lookup", '{"q": "first query"}'), ("lookup", '{"n": 2}')],
                                 ids=["toolu_a", "toolu_b"], content="Let me check."))
    reply = client(server).complete(req(user("hi"), stream=stream))
    assert reply.message.content == "Let me check." and reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("toolu_a", "lookup", '{"q":"first query"}'), ("toolu_b", "lookup", '{"n":2}')]


@pytest.mark.parametrize("stop, finish", [("max_tokens", "length"), ("refusal", "content_filter"),
                                          ("pause_turn", "incomplete"), ("stop_sequence", "stop")])
@pytest.mark.parametrize("stream", [True, False])
def test_stop_reasons_are_mapped(server, stop, finish, stream):
    server.script(Reply.text("x", stop_reason=stop))
    assert client(server).complete(req(user("hi"), stream=stream)).finish_reason == finish


@pytest.mark.parametrize("status, code", [(401, "authentication_error"), (500, "api_error"),
                                          (529, "overloaded_error")])
def test_http_errors_carry_status_and_error_type(server, status, code):
    server.script(Reply.error(status, "nope"))
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(req(user("hi"), stream=True))
    err = caught.value
    assert (err.status, err.code, err.provider, err.partial) == (status, code, "anth", False)
    assert '"message":"nope"' in err.body


def test_rate_limit_error_has_retry_after_and_limit_headers(server):
    server.script(Reply.error(429, "slow down", headers={"retry-after": "7", **LIMITS}))
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(req(user("hi")))
    err = caught.value
    assert (err.status, err.code, err.retry_after) == (429, "rate_limit_error", 7.0)
    assert err.rate_limits == tuple(LIMITS.items())


def test_error_event_mid_stream_is_an_overloaded_http_error(server):
    server.script(Reply.error_event(after_events=4), Reply.error_event(after_events=0))
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(req(user("hi"), stream=True), on_delta=lambda _: None)
    assert (caught.value.status, caught.value.code, caught.value.partial) == (
        529, "overloaded_error", True)
    with pytest.raises(ProviderHTTPError) as caught:
        client(server).complete(req(user("hi"), stream=True), on_delta=lambda _: None)
    assert caught.value.status == 529 and caught.value.partial is False


def test_dropped_stream_is_unavailable_and_partial_once_text_was_shown(server):
    server.script(Reply.drop_stream(after_events=4), Reply.drop_stream(after_events=0),
                  Reply.drop_stream())
    shown: list[str] = []
    with pytest.raises(ProviderUnavailableError) as caught:
        client(server).complete(req(user("hi"), stream=True), on_delta=shown.append)
    assert caught.value.partial is True and shown
    with pytest.raises(ProviderUnavailableError) as caught:
        client(server).complete(req(user("hi"), stream=True), on_delta=shown.append)
    assert caught.value.partial is False
    with pytest.raises(ProviderUnavailableError):
        client(server).complete(req(user("hi")))


def test_timeout_and_garbage(server):
    sse_garbage = "event: message_start\ndata: {oops\n\n"
    server.script(Reply.hang(3), Reply.raw(200, b"{oops"),
                  Reply.raw(200, sse_garbage, "text/event-stream"))
    with pytest.raises(ProviderTimeoutError):
        client(server, timeout=0.5).complete(req(user("hi")))
    with pytest.raises(ModelBehaviourError, match="not JSON"):
        client(server).complete(req(user("hi")))
    with pytest.raises(ModelBehaviourError):
        client(server).complete(req(user("hi"), stream=True))


def test_a_json_answer_to_a_streaming_request_is_accepted(server):
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
               "content": [{"type": "text", "text": "plain"}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 3, "output_tokens": 1}}
    server.script(Reply.raw(200, json.dumps(message)))
    reply = client(server).complete(req(user("hi"), stream=True))
    assert reply.message.content == "plain" and reply.streamed is False


def test_credential_id_picks_the_key(server):
    server.script(Reply.text("a"), Reply.text("b"))
    anth = client(server, keys={"pool-1": "sk-one", "pool-2": "sk-two"})
    anth.complete(req(user("hi"), credential_id="pool-2"))
    anth.complete(req(user("hi")))
    assert [h["x-api-key"] for h in server.request_headers] == ["sk-two", "sk-main"]
    with pytest.raises(UsageError):
        anth.complete(req(user("hi"), credential_id="pool-9"))


def test_a_base_url_with_or_without_the_v1_suffix_reaches_v1_messages(server):
    server.script(Reply.text("ok"), Reply.text("ok"))
    for base_url in (server.base_url + "/v1/", server.base_url):
        anth = AnthropicMessagesClient(base_url=base_url, api_key="k", timeout=5.0)
        assert anth.complete(req(user("hi"))).message.content == "ok"
    assert server.request_headers[-1]["anthropic-version"] == "2023-06-01"


# ---- cancelling from another thread ------------------------------------------------------


@pytest.mark.parametrize("gap", [0.1, 2.0], ids=["trickling", "silent"])
@pytest.mark.parametrize("stream", [True, False])
def test_cancel_aborts_the_response_in_flight(server, stream, gap):
    # The head goes out at once, then a piece every ``gap`` seconds (SSE events, or slices of
    # the JSON body): read to the end this takes far longer than the one second allowed. With
    # a 2 s gap the worker sits in a silent read when the cancel comes.
    server.script(Reply.text("slow " * 200, piece_size=1, chunk_delay=gap), Reply.text("next"))
    shown: list[str] = []
    outcome, took = cancelled_after(server, lambda token: client(server, timeout=30.0).complete(
        req(user("hi"), stream=stream), on_delta=shown.append, cancel=token))
    assert took < 1.0, f"the worker ran on {took:.2f} s after the cancel"
    assert len(outcome) == 1 and isinstance(outcome[0], ProviderUnavailableError), outcome
    assert len(shown) < 20
    # The shared client still serves the next request; a token never cancelled changes nothing.
    reply = client(server).complete(req(user("hi"), stream=stream), cancel=CancelToken())
    assert reply.message.content == "next" and reply.streamed is stream


def _uncached(request: ModelRequest) -> tuple[bytes, dict]:
    """The request converted from scratch, as before histories had a settled prefix."""
    from effects.providers import anthropic_convert
    shared = anthropic_convert._PREFIXES
    anthropic_convert._PREFIXES = anthropic_convert._Prefixes()
    try:
        return request_body(request), to_anthropic(request)
    finally:
        anthropic_convert._PREFIXES = shared


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_message, st.builds(user, st.sampled_from(["u", "v"]))),
                min_size=1, max_size=40),
       st.data())
def test_a_growing_history_converts_as_it_would_from_scratch(history, data):
    """The settled prefix cached from earlier requests never changes what is sent: whatever
    the history, the order of requests (growing, going back, a replaced tail) and the marks."""
    from effects.providers import anthropic_convert
    cache = anthropic_convert._Prefixes()
    shared, step = anthropic_convert._PREFIXES, anthropic_convert.PREFIX_STEP
    anthropic_convert._PREFIXES, anthropic_convert.PREFIX_STEP = cache, 1
    try:
        for _ in range(data.draw(st.integers(1, 6))):
            n = data.draw(st.integers(1, len(history)))
            if data.draw(st.booleans()):  # a compression: same first message, new tail
                history = history[:n] + data.draw(st.lists(_message, max_size=5))
                n = len(history)
            marks = data.draw(st.lists(st.integers(-1, n - 1), max_size=4, unique=True))
            request = req(*history[:n], cache_marks=tuple(marks))
            expected_body, expected = _uncached(request)
            assert to_anthropic(request) == expected
            assert request_body(request) == expected_body
    finally:
        anthropic_convert._PREFIXES, anthropic_convert.PREFIX_STEP = shared, step


def test_a_long_session_reuses_its_prefix():
    from effects.providers import anthropic_convert
    history: list[Message] = []
    for i in range(40):
        history += [user(f"q{i}"), calls(f"c{i}"), result(f"c{i}"),
                    Message(role="assistant", content=f"a{i}")]
        request = req(*history, user("next"), cache_marks=(-1, len(history)))
        assert request_body(request) == _uncached(request)[0]
    prefix = anthropic_convert._PREFIXES.plan(request).prefix
    assert len(prefix.messages) >= len(history) - anthropic_convert.PREFIX_STEP - 4
