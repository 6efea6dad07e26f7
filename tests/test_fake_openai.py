"""The fake OpenAI server speaks the real protocol: proven with the official `openai` SDK."""

from __future__ import annotations

import http.client
import json
import socket
import time

import openai
import pytest

from tests.fake_openai import FakeOpenAIServer, Reply, Usage

MSGS = [{"role": "user", "content": "Hello there, how are you doing today?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}},
    },
]


@pytest.fixture
def srv():
    with FakeOpenAIServer() as s:
        yield s


def make_client(srv: FakeOpenAIServer, api_key: str = "sk-test") -> openai.OpenAI:
    # Plain loopback HTTP: skipping the TLS context keeps client construction cheap.
    return openai.OpenAI(
        base_url=srv.base_url,
        api_key=api_key,
        max_retries=0,
        timeout=5,
        http_client=openai.DefaultHttpxClient(verify=False),
    )


@pytest.fixture
def client(srv):
    c = make_client(srv)
    yield c
    c.close()


def test_text_non_stream(srv, client):
    srv.script(
        Reply.text(
            "The answer is 42.",
            reasoning="think hard",
            usage=Usage(10, 7, cached=4, reasoning=3),
        )
    )
    r = client.chat.completions.create(model="gpt-x", messages=MSGS, temperature=0)
    assert r.object == "chat.completion"
    assert r.model == "gpt-x"
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "The answer is 42."
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert choice.message.model_extra["reasoning_content"] == "think hard"
    assert r.usage.prompt_tokens == 10 and r.usage.completion_tokens == 7
    assert r.usage.total_tokens == 17
    assert r.usage.prompt_tokens_details.cached_tokens == 4
    assert r.usage.completion_tokens_details.reasoning_tokens == 3
    # the request was recorded, with its headers
    assert srv.requests == [
        {"model": "gpt-x", "messages": MSGS, "temperature": 0}
    ]
    assert srv.request_headers[0]["Authorization"] == "Bearer sk-test"
    assert srv.request_headers[0]["authorization"] == "Bearer sk-test"
    srv.assert_done()


def test_default_usage_is_rough_estimate(srv, client):
    srv.script(Reply.text("abcdefgh"))
    r = client.chat.completions.create(model="m", messages=MSGS)
    assert r.usage.prompt_tokens == len(MSGS[0]["content"]) // 4
    assert r.usage.completion_tokens == 8 // 4 + 1
    assert "reasoning_content" not in (r.choices[0].message.model_extra or {})


def test_text_stream_with_usage_and_keepalive(srv, client):
    content = "Streaming works across many small pieces."
    srv.script(Reply.text(content, reasoning="mull it over"), Reply.text("second"))
    stream = client.chat.completions.create(
        model="gpt-s", messages=MSGS, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""
    text_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(text_chunks) == -(-len(content) // 3)  # 3-char pieces
    assert "".join(c.choices[0].delta.content for c in text_chunks) == content
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert reasoning == "mull it over"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[0].id == chunks[-1].id and chunks[0].model == "gpt-s"

    # without include_usage: no usage chunk; the keep-alive connection is reused
    chunks2 = list(client.chat.completions.create(model="m", messages=MSGS, stream=True))
    assert chunks2[-1].choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks2) == "second"
    srv.assert_done()


def test_tool_calls_streamed_assembled_by_sdk(srv, client):
    args = json.dumps({"path": "/etc/hosts"})
    srv.script(
        Reply.tool_calls(
            [("read_file", args), ("ls", "{}")], content="Let me look.", ids=["c1", "c2"]
        )
    )
    with client.chat.completions.stream(
        model="m", messages=MSGS, tools=TOOLS, stream_options={"include_usage": True}
    ) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_completion()
    assert "tool_calls.function.arguments.delta" in events
    msg = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Let me look."
    assert [(t.id, t.type, t.function.name, t.function.arguments) for t in msg.tool_calls] == [
        ("c1", "function", "read_file", args),
        ("c2", "function", "ls", "{}"),
    ]
    assert final.usage is not None and final.usage.completion_tokens > 0
    srv.assert_done()


def test_tool_calls_stream_deltas_shape_and_non_stream(srv, client):
    srv.script(
        Reply.tool_calls([("read_file", '{"path":"a.txt"}')], piece_size=5),
        Reply.tool_calls([("ls", "{}"), ("ls", '{"x":1}')]),
    )
    chunks = list(
        client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, stream=True)
    )
    assert chunks[0].choices[0].delta.content is None  # tool-only reply, like OpenAI
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].id and calls[0].type == "function" and calls[0].function.name == "read_file"
    assert calls[0].function.arguments == ""
    assert all(tc.id is None and tc.function.name is None for tc in calls[1:])
    assert [tc.function.arguments for tc in calls[1:]] == ['{"pat', 'h":"a', '.txt"', "}"]

    r = client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS)
    tcs = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls"
    assert r.choices[0].message.content is None
    assert [t.function.arguments for t in tcs] == ["{}", '{"x":1}']
    assert len({t.id for t in tcs} | {calls[0].id}) == 3  # default ids are unique
    srv.assert_done()


@pytest.mark.parametrize(
    ("status", "exc"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (404, openai.NotFoundError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_error_statuses_map_to_sdk_exceptions(srv, client, status, exc, stream):
    srv.script(
        Reply.error(
            status,
            f"boom {status}",
            type="rate_limit_exceeded" if status == 429 else "invalid_request_error",
            code="rate_limit_exceeded" if status == 429 else None,
            headers={"Retry-After": "7", "x-ratelimit-remaining-requests": "0"},
        )
    )
    with pytest.raises(exc) as info:
        client.chat.completions.create(model="m", messages=MSGS, stream=stream)
    err = info.value
    assert err.status_code == status
    assert err.body == {
        "message": f"boom {status}",
        "type": "rate_limit_exceeded" if status == 429 else "invalid_request_error",
        "param": None,
        "code": "rate_limit_exceeded" if status == 429 else None,
    }
    assert err.response.headers["retry-after"] == "7"
    assert err.response.headers["x-ratelimit-remaining-requests"] == "0"
    srv.assert_done()


def test_raw_garbage_body(srv, client):
    srv.script(
        Reply.raw(200, b"{not json"), Reply.raw(502, "<html>bad gateway</html>", "text/html")
    )
    with pytest.raises(Exception) as info:  # the SDK's JSON decode error
        client.chat.completions.create(model="m", messages=MSGS)
    assert not isinstance(info.value, openai.APIStatusError)
    with pytest.raises(openai.InternalServerError) as info2:
        client.chat.completions.create(model="m", messages=MSGS)
    assert info2.value.status_code == 502
    srv.assert_done()


def test_assert_done_detects_unused_reply():
    with FakeOpenAIServer() as s:
        s.script(Reply.text("never asked for"))
        with pytest.raises(AssertionError, match="1 scripted reply never requested"):
            s.assert_done()


def test_assert_done_detects_unexpected_request(srv, client):
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="m", messages=MSGS)
    assert "no scripted reply left" in info.value.message
    assert info.value.body["message"] == "fake server: no scripted reply left"
    with pytest.raises(AssertionError, match="unexpected request"):
        srv.assert_done()


def test_default_reply_used_when_queue_empty(client):
    with FakeOpenAIServer(default=Reply.text("default")) as s:
        c = make_client(s)
        s.script(Reply.text("first"))
        got = [c.chat.completions.create(model="m", messages=MSGS).choices[0].message.content
               for _ in range(3)]
        assert got == ["first", "default", "default"]
        s.assert_done()
        assert len(s.requests) == 3
        c.close()


def test_drop_stream_raises_connection_error(srv, client):
    srv.script(Reply.drop_stream(after_chunks=2), Reply.drop_stream(), Reply.text("recovered"))
    received = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in client.chat.completions.create(model="m", messages=MSGS, stream=True):
            received.append(chunk.choices[0].delta.content)
    assert received == ["", "Thi", "s a"]  # role chunk + 2 content chunks, then the cut
    # non-streaming: the connection closes without any response
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=MSGS)
    # the client recovers on a fresh connection
    r = client.chat.completions.create(model="m", messages=MSGS)
    assert r.choices[0].message.content == "recovered"
    srv.assert_done()


def test_hang_and_delay(srv, client):
    srv.script(Reply.hang(2.0), Reply.text("slow", delay=0.1))
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=MSGS, timeout=0.2)
    t0 = time.perf_counter()
    r = client.chat.completions.create(model="m", messages=MSGS)
    assert time.perf_counter() - t0 >= 0.1
    assert r.choices[0].message.content == "slow"
    srv.assert_done()


def test_hang_answers_late():
    with FakeOpenAIServer() as s:
        s.script(Reply.hang(0.05))
        c = make_client(s)
        r = c.chat.completions.create(model="m", messages=MSGS)
        assert r.choices[0].message.content == "late"
        c.close()


def test_close_does_not_wait_for_hanging_reply():
    s = FakeOpenAIServer()
    s.script(Reply.hang(30))
    sock = socket.create_connection(("127.0.0.1", s.port))
    body = b'{"model":"m","messages":[]}'
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    while not s.requests:
        time.sleep(0.005)
    t0 = time.perf_counter()
    s.close()
    assert time.perf_counter() - t0 < 2
    sock.close()


def test_unknown_route_and_bad_json_are_unexpected(srv, client):
    # GET /props and /v1/models are the window probe's, answered as a hosted API does.
    with pytest.raises(openai.NotFoundError):
        client.files.list()
    with pytest.raises(AssertionError, match="unexpected request.*GET /v1/files"):
        srv.assert_done()

    with FakeOpenAIServer(default=Reply.text("x")) as s:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=b"[1,",
            headers={"Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        assert resp.status == 400
        assert "bad JSON body" in json.loads(resp.read())["error"]["message"]
        conn.close()
        assert s.requests == [None]
        with pytest.raises(AssertionError, match="unparseable request body"):
            s.assert_done()


def test_server_seconds_and_throughput():
    with FakeOpenAIServer(default=Reply.text("ok")) as s:
        c = make_client(s)
        assert s.server_seconds == 0
        t0 = time.perf_counter()
        for _ in range(50):
            c.chat.completions.create(model="m", messages=MSGS)
        for _ in range(20):
            list(c.chat.completions.create(model="m", messages=MSGS, stream=True))
        wall = time.perf_counter() - t0
        assert 0 < s.server_seconds < wall
        assert wall < 2.0, wall  # keep-alive + no Nagle stalls
        c.close()
        s.assert_done()


def _post(conn: http.client.HTTPConnection, body: dict) -> http.client.HTTPResponse:
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    return conn.getresponse()


def test_connections_are_counted_once_per_kept_alive_connection():
    with FakeOpenAIServer(default=Reply.text("hi")) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        for stream in (False, True, False):
            _post(conn, {"model": "m", "messages": MSGS, "stream": stream}).read()
        conn.close()
        assert srv.connections == 1
        other = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        _post(other, {"model": "m", "messages": MSGS}).read()
        other.close()
        assert srv.connections == 2


@pytest.mark.parametrize("stream, beat", [(True, b": keep-alive"), (False, b" ")])
def test_a_stall_sends_keepalive_bytes_until_the_client_leaves(stream, beat):
    from tests.fake_http import Stall
    with FakeOpenAIServer() as srv:
        srv.script(Stall(interval=0.01, seconds=30.0))
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        response = _post(conn, {"model": "m", "messages": MSGS, "stream": stream})
        assert response.status == 200
        assert response.read1(64).startswith(beat)
        assert srv.disconnects == 0
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        assert srv.wait_for_disconnect(5.0)


def test_a_client_that_leaves_during_a_hang_is_seen():
    with FakeOpenAIServer() as srv:
        srv.script(Reply.hang(30))
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        body = json.dumps({"model": "m", "messages": MSGS}).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
        deadline = time.monotonic() + 5
        while not srv.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        sock.close()
        assert srv.wait_for_disconnect(5.0) and srv.disconnects == 1
