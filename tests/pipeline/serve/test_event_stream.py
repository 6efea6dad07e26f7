"""``EventStream`` and the session followers it feeds: whatever way a stream ends, a client
gone before its first byte included, what it set up is taken down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from pipeline.serve.routes import subscribe
from pipeline.serve.sse import EventStream


async def _gone(*_: Any) -> dict[str, str]:
    return {"type": "http.disconnect"}


async def _never_sent(message: dict[str, Any]) -> None:
    await asyncio.sleep(3600)  # a client that went away: nothing of the response gets out


async def _waits() -> dict[str, str]:
    await asyncio.sleep(3600)
    return {"type": "http.disconnect"}


def _stream(started: list[str]) -> AsyncIterator[bytes]:
    async def body() -> AsyncIterator[bytes]:
        started.append("body")
        yield b"data: 1\n\n"
    return body()


def test_a_client_gone_before_the_first_byte_ends_the_stream_all_the_same() -> None:
    started: list[str] = []
    session = SimpleNamespace(subscribers=set())

    async def scenario() -> None:
        _, unsubscribe = subscribe(session)  # type: ignore[arg-type]
        left: list[str] = []
        stream = EventStream(_stream(started), on_disconnect=lambda: left.append("left"),
                             on_end=unsubscribe)
        await stream({}, _gone, _never_sent)
        assert left == ["left"]
    asyncio.run(scenario())
    assert started == []  # the body never ran: its own cleanup could not have
    assert session.subscribers == set()


def test_a_stream_that_runs_to_its_end_takes_its_follower_down_once() -> None:
    started: list[str] = []
    session = SimpleNamespace(subscribers=set())
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def scenario() -> None:
        subscriber, unsubscribe = subscribe(session)  # type: ignore[arg-type]
        assert session.subscribers == {subscriber}
        ended: list[str] = []
        stream = EventStream(_stream(started), on_disconnect=lambda: ended.append("left"),
                             on_end=lambda: (unsubscribe(), ended.append("end")))
        await stream({}, _waits, send)
        assert ended == ["end"]
    asyncio.run(scenario())
    assert started == ["body"] and session.subscribers == set()
    assert [m.get("body") for m in sent[1:]] == [b"data: 1\n\n", b""]
