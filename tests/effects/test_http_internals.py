"""What the HTTP shell relies on below httpx2's public API (effects/providers/http_shell.py).

httpx2 has no public seam for a network backend, so the shell puts its guarded backend (the
total deadline, the abort before the response head) into each transport's httpcore2 pool
through private attributes. pyproject.toml pins httpx2 and httpcore2 to one minor version; an
upgrade that moves any of these fails here, naming what moved, instead of leaving model calls
silently without their deadline or their abort.
"""

from __future__ import annotations

import inspect
import json
import socket
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2
import pytest
from packaging.requirements import Requirement

from effects.providers import http_shell
from stages.errors import UsageError
from tests.fake_openai import FakeOpenAIServer, Reply

ROOT = Path(__file__).resolve().parents[2]
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def moved(what: str) -> str:
    return (f"httpx2 {httpx2.__version__} / httpcore2 {httpcore2.__version__} changed {what}, "
            "which the HTTP shell's deadline and abort rely on: update "
            "effects/providers/http_shell.py and the pin in pyproject.toml")


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default=Reply.text("ok")) as fake:
        yield fake


def post(client: Any, server: FakeOpenAIServer) -> Any:
    return client.post(f"{server.base_url}/chat/completions", content=BODY,
                       headers={"Content-Type": "application/json"})


class Recording(httpcore2.NetworkBackend):
    """A network backend that records the calls the pool makes, then does them."""

    def __init__(self, inner: Any, fail_reads: BaseException | None = None) -> None:
        self.inner, self.fail_reads, self.calls = inner, fail_reads, []

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> Any:
        self.calls.append(("connect_tcp", host, port))
        stream = self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return RecordingStream(stream, self) if self.fail_reads else stream


class RecordingStream(httpcore2.NetworkStream):
    def __init__(self, inner: Any, backend: Recording) -> None:
        self.inner, self.backend = inner, backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        assert self.backend.fail_reads is not None
        raise self.backend.fail_reads

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, timeout)

    def close(self) -> None:
        self.inner.close()

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


@pytest.mark.parametrize("name", ["httpx2", "httpcore2"])
def test_the_installed_version_is_in_the_range_pyproject_pins(name: str) -> None:
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(Requirement(p) for p in pins if Requirement(p).name == name)
    installed = {"httpx2": httpx2.__version__, "httpcore2": httpcore2.__version__}[name]
    assert pin.specifier.contains(installed), (
        f"{name} {installed} is outside {pin.specifier}: run this file's tests on it, then widen "
        "the pin in pyproject.toml")


def test_a_client_keeps_its_transport_and_proxy_mounts(monkeypatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "localhost")
    client = httpx2.Client()
    assert isinstance(getattr(client, "_transport", None), httpx2.HTTPTransport), \
        moved("Client._transport")
    mounts = getattr(client, "_mounts", None)
    assert isinstance(mounts, dict), moved("Client._mounts")
    assert any(isinstance(t, httpx2.HTTPTransport) for t in mounts.values()), \
        moved("Client._mounts (an environment proxy is no longer a mounted HTTPTransport)")
    client.close()


@pytest.mark.parametrize("proxy", [None, "http://127.0.0.1:9"])
def test_a_transport_keeps_its_pool_and_the_pools_network_backend(proxy: str | None) -> None:
    transport = httpx2.HTTPTransport(proxy=proxy)
    pool = getattr(transport, "_pool", None)
    assert isinstance(pool, httpcore2.ConnectionPool), moved("HTTPTransport._pool")
    assert isinstance(getattr(pool, "_network_backend", None), httpcore2.SyncBackend), \
        moved(f"{type(pool).__name__}._network_backend")


@pytest.mark.parametrize(("ours", "theirs"), [("GuardedBackend", httpcore2.SyncBackend),
                                              ("GuardedStream", httpcore2.NetworkStream)])
def test_the_guarded_wrappers_take_the_arguments_httpcore2_passes(ours: str, theirs: type) -> None:
    """The wrappers forward by position: the names and their order must be httpcore2's."""
    wrapper = http_shell._guarded_types()[0] if ours == "GuardedBackend" else _guarded_stream_type()
    methods = [m for m in vars(wrapper) if not m.startswith("_")]
    assert methods
    for method in methods:
        theirs_method = getattr(theirs, method, None)
        assert theirs_method is not None, moved(f"{theirs.__name__}.{method} (gone)")
        assert (list(inspect.signature(getattr(wrapper, method)).parameters)
                == list(inspect.signature(theirs_method).parameters)), \
            moved(f"the parameters of {theirs.__name__}.{method}")


def _guarded_stream_type() -> type:
    backend = http_shell._guarded_types()[0](httpcore2.SyncBackend())
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        stream = backend.connect_tcp("127.0.0.1", listener.getsockname()[1], 5.0)
        stream.close()
    return type(stream)


def test_the_pool_connects_through_the_backend_put_in_its_place(server) -> None:
    client = httpx2.Client()
    pool = client._transport._pool
    pool._network_backend = recording = Recording(pool._network_backend)
    for _ in range(2):
        assert post(client, server).status_code == 200
    client.close()
    address = urlsplit(server.base_url)
    assert recording.calls == [("connect_tcp", address.hostname, address.port)], \
        moved("how a ConnectionPool connects (not through _network_backend, or not once)")


def test_an_httpx2_error_raised_by_a_stream_passes_through_unchanged(server) -> None:
    """The guarded stream raises httpx2's own timeouts; the shell catches them by type."""
    error = httpx2.ReadTimeout("the call's total deadline has passed")
    client = httpx2.Client()
    pool = client._transport._pool
    pool._network_backend = Recording(pool._network_backend, fail_reads=error)
    with pytest.raises(httpx2.ReadTimeout) as raised:
        post(client, server)
    client.close()
    assert raised.value is error, moved("the exceptions a network stream's errors become")


def test_a_plain_tcp_stream_gives_its_socket() -> None:
    """An abort shuts this socket down from another thread."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        stream = httpcore2.SyncBackend().connect_tcp("127.0.0.1", listener.getsockname()[1], 5.0)
        try:
            assert isinstance(stream.get_extra_info("socket"), socket.socket), \
                moved("NetworkStream.get_extra_info('socket')")
        finally:
            stream.close()


def test_a_response_body_can_be_replaced_and_is_closed_through_it(server) -> None:
    """The shell wraps a response's stream to see its connection go back to the pool."""
    closed: list[bool] = []

    class Held(httpx2.SyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __iter__(self) -> Iterator[bytes]:
            return iter(self.inner)

        def close(self) -> None:
            closed.append(True)
            self.inner.close()

    with httpx2.Client() as client:
        request = client.build_request("POST", f"{server.base_url}/chat/completions",
                                       content=BODY, headers={"Content-Type": "application/json"})
        response = client.send(request, stream=True)
        response.stream = Held(response.stream)
        assert json.loads(response.read())["choices"][0]["message"]["content"] == "ok"
        response.close()
    assert closed, moved("Response.stream (a replaced body is no longer closed through it)")


def test_a_transport_without_the_pool_is_an_error_not_a_call_without_deadline() -> None:
    """If the internals move anyway (a pin overridden), the shell refuses to build a client."""
    with pytest.raises(UsageError, match=r"httpx2 .* no longer exposes the connection pool"):
        http_shell._pool_of(httpx2.MockTransport(lambda request: httpx2.Response(200)))


def test_the_shells_client_wraps_every_pool_it_may_send_through(monkeypatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "localhost")
    backend_type = http_shell._guarded_types()[0]
    client = http_shell._new_client("https://api.example/v1", 5.0)
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    assert len(transports) >= 2
    assert all(isinstance(t._pool._network_backend, backend_type) for t in transports)
    client.close()
