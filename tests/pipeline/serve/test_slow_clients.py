"""Clients that send their request slowly, on raw sockets, are cut after the gateway's
``header_timeout`` (the head) and ``body_timeout`` (the body); a kept-alive connection that
is merely idle is not."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import TOKENS, Gateway, start_gateway

HEAD_TIMEOUT = 1.5
BODY_TIMEOUT = 2.0
# Well past the deadline, for a loaded machine; still far from "never".
CUT_WITHIN = 6.0
HEAD = (f"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        f"{TOKENS['alice']}\r\nContent-Type: application/json\r\n").encode()


@pytest.fixture
def impatient(upstream, tmp_path) -> Iterator[Gateway]:
    workdir = tmp_path / "work"
    workdir.mkdir()
    yield from start_gateway(upstream, tmp_path / "home", workdir,
                             serve={"header_timeout": HEAD_TIMEOUT,
                                    "body_timeout": BODY_TIMEOUT})


def _connect(gateway: Gateway) -> socket.socket:
    raw = socket.create_connection(("127.0.0.1", int(gateway.url.rsplit(":", 1)[1])))
    raw.settimeout(0.2)
    return raw


def _trickle_until_cut(raw: socket.socket, data: bytes) -> tuple[float, bytes]:
    """Send ``data`` a byte every 0.25 s until the server closes the connection: how long
    that took, and what it answered."""
    start, answer = time.monotonic(), b""
    for byte in data:
        if time.monotonic() - start > CUT_WITHIN * 2:
            break
        try:
            raw.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        try:
            received = raw.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            break
        answer += received
        if not received:
            break
    return time.monotonic() - start, answer


def test_a_head_sent_a_byte_at_a_time_is_cut(impatient):
    with _connect(impatient) as raw:
        took, answer = _trickle_until_cut(raw, HEAD + b"X-Slow: " + b"a" * 200)
    assert HEAD_TIMEOUT <= took < CUT_WITHIN, took
    assert answer == b""  # no request was made: nothing to answer


def test_a_connection_that_sends_nothing_is_cut(impatient):
    with _connect(impatient) as raw:
        raw.settimeout(CUT_WITHIN)
        start = time.monotonic()
        assert raw.recv(100) == b""
        assert time.monotonic() - start < CUT_WITHIN


def test_a_body_sent_a_byte_at_a_time_is_a_408_and_cut(impatient):
    body = json.dumps({"platform": "gateway", "pad": "x" * 200}).encode()
    with _connect(impatient) as raw:
        raw.sendall(HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode())
        took, answer = _trickle_until_cut(raw, body)
        raw.settimeout(CUT_WITHIN)
        while chunk := raw.recv(65536):
            answer += chunk
    assert BODY_TIMEOUT <= took < CUT_WITHIN, took
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b'"request_timeout"' in answer
    assert impatient.pool.owners.of("alice") == []


def test_a_kept_alive_connection_outlives_the_head_deadline_between_requests(impatient):
    impatient.upstream.script(Reply.text("first"), Reply.text("second"))
    body = json.dumps({"model": "mibyan",
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = (HEAD.replace(b"/v1/sessions", b"/v1/chat/completions")
               + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    with _connect(impatient) as raw:
        raw.settimeout(30)
        for expected in (b"first", b"second"):
            raw.sendall(request)
            answer = b""
            while expected not in answer:
                chunk = raw.recv(65536)
                assert chunk, "the connection was closed"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200 ")
            time.sleep(HEAD_TIMEOUT + 1)  # idle, not slow: uvicorn's keep-alive applies
