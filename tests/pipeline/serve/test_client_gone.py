"""A client that leaves while its session is made or reopened: the ASGI app driven directly
with a client that sends its request and is gone at once, while the pool's one worker is
taken (the work waits for it) or has already started the work."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from pipeline.agent import Agent
from pipeline.serve.app import create_app
from pipeline.serve.bearer import ANONYMOUS
from pipeline.serve.gateway_config import ServeConfig
from pipeline.serve.pool import SessionPool
from pipeline.testing import CountingIds, FakeClock, ScriptedModel

BOUND = 30.0  # seconds: only a broken gateway waits this long
CHAT = {"model": "mibyan", "messages": [{"role": "user", "content": "hi"}]}


class Agents:
    """An agent factory that counts the agents it made; ``gate`` (when set) holds each one
    until it is opened."""

    def __init__(self, home) -> None:
        self.home = home
        self.made: list[str | None] = []
        self.started = threading.Event()
        self.gate: threading.Event | None = None

    def __call__(self, session_id, platform, listener) -> Agent:
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(BOUND)
        self.made.append(session_id)
        return Agent(client=ScriptedModel(), home=self.home, clock=FakeClock(),
                     ids=CountingIds(), session_id=session_id, event_listener=listener)


@pytest.fixture
def agents(tmp_path) -> Agents:
    return Agents(tmp_path / "home")


@pytest.fixture
def pool(agents, tmp_path) -> Iterator[SessionPool]:
    pool = SessionPool(agents, home=agents.home, workers=1)
    yield pool
    pool.shutdown()


def _scope(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
            "root_path": "", "query_string": b"", "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 8642),
            "headers": [(b"host", b"127.0.0.1:8642"), (b"content-type", b"application/json"),
                        (b"transfer-encoding", b"chunked")]}


def _request(pool: SessionPool, method: str, path: str, body: dict | None = None,
             before_leaving: Callable[[], Awaitable[None]] | None = None) -> int:
    """The status the app answers a client that sends its request, then leaves (after
    ``before_leaving``, when given)."""
    sent: list[dict[str, Any]] = []
    messages = iter([{"type": "http.request", "body": json.dumps(body).encode() if body
                      else b"", "more_body": False}])

    async def receive() -> dict[str, Any]:
        message = next(messages, None)
        if message is not None:
            return message
        if before_leaving is not None:
            await before_leaving()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def scenario() -> None:
        app = create_app(pool, ServeConfig(auth=False), models=("mibyan",))
        answered = asyncio.ensure_future(app(_scope(method, path), receive, send))
        done, _ = await asyncio.wait((answered,), timeout=BOUND)
        assert answered in done, "the gateway went on waiting for a client that left"
    asyncio.run(scenario())
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


@pytest.fixture
def busy(pool) -> Iterator[None]:
    """The pool's one worker is taken until the test ends."""
    taken, free = threading.Event(), threading.Event()
    pool.submit(lambda: (taken.set(), free.wait(BOUND)))
    assert taken.wait(BOUND)
    yield
    free.set()


@pytest.mark.parametrize(("path", "body"), [("/v1/sessions", {}),
                                            ("/v1/chat/completions", CHAT)])
def test_a_session_is_not_made_for_a_client_that_left_while_it_waited(pool, agents, busy, path,
                                                                      body):
    assert _request(pool, "POST", path, body) == 499
    assert agents.made == [] and pool.owners.of(ANONYMOUS) == []


def test_a_session_is_not_reopened_for_a_client_that_left_while_it_waited(pool, agents, busy):
    pool.adopt(ANONYMOUS, "20261201_000000_abcdef")  # closed: its next use reopens it
    assert _request(pool, "GET", "/v1/sessions/20261201_000000_abcdef") == 499
    assert agents.made == [] and pool.owned(ANONYMOUS) == []


def test_a_session_whose_making_had_started_when_its_client_left_is_kept(pool, agents):
    """The cheapest consistent outcome: made, it is its owner's (and listed)."""
    agents.gate = threading.Event()

    async def once_started() -> None:
        assert await asyncio.to_thread(agents.started.wait, BOUND)
        asyncio.get_running_loop().call_soon(agents.gate.set)  # as the client leaves

    assert _request(pool, "POST", "/v1/sessions", {}, before_leaving=once_started) == 201
    made = [sid for sid, _ in pool.owners.of(ANONYMOUS)]
    assert made == [s.id for s in pool.owned(ANONYMOUS)] and len(made) == len(agents.made) == 1
