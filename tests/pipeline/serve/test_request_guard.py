"""What a web page can do to a gateway on loopback: nothing (``pipeline.serve.guard``).

Each request is what a browser sends: a cross-origin form or ``fetch`` with ``text/plain``
(a CORS "simple request", sent without asking first), a page of a rebound DNS name (its own
name in ``Host``), a preflight. The gateway runs with ``--no-auth``, as the attack needs."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx2
import pytest

from pipeline.serve.guard import host_name
from pipeline.serve.json_limits import deeper_than
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import Gateway, start_gateway

CHAT = {"model": "mibyan", "messages": [{"role": "user", "content": "run rm -rf ~"}]}
PAGE = "https://evil.example"


@pytest.fixture
def open_gateway(upstream, tmp_path) -> Iterator[Gateway]:
    """``mibyan serve --no-auth`` on loopback, a web page allowed as a CORS origin."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    yield from start_gateway(upstream, tmp_path / "home", workdir, no_auth=True,
                             serve={"cors_origins": ["https://chat.example.com/"],
                                    "allowed_hosts": ["agent.lan"]})
    upstream.assert_done()


def _port(gateway: Gateway) -> int:
    return int(gateway.url.rsplit(":", 1)[1])


def _post(gateway: Gateway, headers: dict[str, str], body: bytes | None = None,
          path: str = "/v1/chat/completions") -> httpx2.Response:
    with httpx2.Client(base_url=gateway.url, timeout=30) as client:
        return client.post(path, content=json.dumps(CHAT).encode() if body is None else body,
                           headers=headers)


def _nothing_ran(gateway: Gateway) -> None:
    assert gateway.upstream.requests == []
    assert gateway.pool.owners.of("anonymous") == []


@pytest.mark.parametrize(("headers", "status", "code"), [
    # A form or fetch of another site: text/plain needs no preflight.
    ({"Origin": PAGE, "Content-Type": "text/plain"}, 403, "origin_not_allowed"),
    ({"Origin": "null", "Content-Type": "application/json"}, 403, "origin_not_allowed"),
    # The same, from a page whose name now resolves to 127.0.0.1 (DNS rebinding).
    ({"Host": "evil.example:8642", "Content-Type": "text/plain"}, 421, "host_not_allowed"),
    ({"Host": "localhost.evil.example", "Content-Type": "application/json"}, 421,
     "host_not_allowed"),
    # No Origin at all (a client that is no browser), still not JSON.
    ({"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
    ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"),
    ({"Content-Type": "multipart/form-data; boundary=x"}, 415, "unsupported_media_type"),
    ({"Content-Type": "application/json; charset=latin-1"}, 415, "unsupported_media_type"),
    ({}, 415, "unsupported_media_type"),
])
def test_a_request_a_web_page_can_send_runs_nothing(open_gateway, headers, status, code):
    response = _post(open_gateway, headers)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert response.headers["connection"] == "close"
    assert "access-control-allow-origin" not in response.headers
    _nothing_ran(open_gateway)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST.", "[::1]", "agent.lan"])
def test_the_gateway_answers_for_loopback_s_names_and_the_allowed_ones(open_gateway, host):
    open_gateway.upstream.script(Reply.text("hello"))
    response = _post(open_gateway, {"Host": f"{host}:{_port(open_gateway)}",
                                    "Content-Type": "application/json; charset=UTF-8"})
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "hello"


def test_host_names_are_compared_without_their_port_case_or_final_dot():
    assert [host_name(h) for h in ("LocalHost.:80", "[::1]:8642", "[::1]", "a.b", "a.b:x")] == [
        "localhost", "[::1]", "[::1]", "a.b", "a.b:x"]


def test_a_configured_origin_gets_cors_and_its_preflight_others_none(open_gateway):
    open_gateway.upstream.script(Reply.text("hi page"))
    allowed = "https://chat.example.com"
    with httpx2.Client(base_url=open_gateway.url, timeout=30) as client:
        preflight = client.options("/v1/chat/completions", headers={
            "Origin": allowed, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        refused = client.options("/v1/chat/completions", headers={
            "Origin": PAGE, "Access-Control-Request-Method": "POST"})
        answer = client.post("/v1/chat/completions", json=CHAT, headers={"Origin": allowed})
        plain = client.get("/v1/models")
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == allowed
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == allowed
    assert "x-mibyan-session-id" in answer.headers["access-control-expose-headers"]
    assert not any(h.startswith("access-control-") for h in plain.headers)


def test_without_configured_origins_no_preflight_succeeds(gateway):
    with gateway.client() as client:
        preflight = client.options("/v1/chat/completions", headers={
            "Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 403
    assert not any(h.startswith("access-control-") for h in preflight.headers)


@pytest.mark.parametrize("depth", [65, 200, 5000, 100_000])
def test_json_nested_past_the_limit_is_a_400_naming_it(open_gateway, depth):
    body = b'{"model": "mibyan", "messages": ' + b"[" * depth + b"]" * depth + b"}"
    response = _post(open_gateway, {"Content-Type": "application/json"}, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_json" and "more than the 64 levels allowed" in error["message"]
    _nothing_ran(open_gateway)


def test_json_at_the_limit_is_parsed(open_gateway):
    value = {"model": "mibyan", "messages": [{"role": "user", "content": "hi"}],
             "metadata": {"x": json.loads("[" * 62 + "]" * 62)}}
    assert deeper_than(value, 63) and not deeper_than(value, 64)
    body = json.dumps(value).encode()
    open_gateway.upstream.script(Reply.text("deep enough"))
    response = _post(open_gateway, {"Content-Type": "application/json"}, body)
    assert response.status_code == 200, response.text


def test_a_body_that_is_not_utf8_is_a_400(open_gateway):
    response = _post(open_gateway, {"Content-Type": "application/json"},
                     json.dumps(CHAT).encode("utf-16"))
    assert response.status_code == 400 and "not UTF-8" in response.json()["error"]["message"]


def test_a_declared_length_past_the_limit_is_a_413_before_any_byte_of_it(small_bodies):
    import socket
    with socket.create_connection(("127.0.0.1", _port(small_bodies)), timeout=30) as raw:
        raw.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Authorization: Bearer x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 1000000000\r\n\r\n")
        answer = raw.recv(65536)
        assert answer.startswith(b"HTTP/1.1 413 ")
        while raw.recv(65536):  # the connection is closed after the answer
            pass


@pytest.fixture
def small_bodies(upstream, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    yield from start_gateway(upstream, tmp_path / "home", workdir,
                             serve={"max_body_bytes": 1000})


def test_a_websocket_upgrade_from_a_web_page_is_refused_as_any_request(open_gateway):
    """Browsers open WebSockets across origins without CORS; the gateway has no WebSocket
    route and serves upgrades as plain requests, which the guard checks (uvicorn would hand
    them to a WebSocket library, when one is installed, past the guard)."""
    with httpx2.Client(base_url=open_gateway.url, timeout=30) as client:
        response = client.get("/v1/sessions", headers={
            "Origin": PAGE, "Connection": "Upgrade", "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "origin_not_allowed"
