"""The guard's deadline for a request's body (``[serve] body_timeout``) is a slow client's, not
a busy gateway's: a body that reached the socket in time is read, however late the event loop
gets to it. (Trickling clients are cut: tests/pipeline/serve/test_slow_clients.py.)"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from starlette.responses import JSONResponse

from pipeline.serve.admission import Admission
from pipeline.serve.gateway_config import ServeConfig
from pipeline.serve.guard import RequestGuard

DEADLINE = 0.2
SCOPE = {"type": "http", "method": "POST", "path": "/v1/sessions",
         "headers": [(b"host", b"127.0.0.1"), (b"content-length", b"2"),
                     (b"content-type", b"application/json")]}


async def _guarded(busy_for: float) -> tuple[list[dict[str, Any]], list[bytes]]:
    """A request whose body ``{}`` reaches the socket 50 ms in, while the loop is held for
    ``busy_for`` seconds (the deadline is 0.2 s): what the guard sent, and the app got."""
    seen: list[bytes] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((await receive())["body"])
        await JSONResponse({})(scope, receive, send)

    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)

    async def receive() -> dict[str, Any]:  # as uvicorn's: the bytes the transport read
        return {"type": "http.request", "body": await reader.read(65536), "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    def busy_loop() -> None:
        theirs.sendall(b"{}")
        time.sleep(busy_for)  # someone else's work on the loop

    asyncio.get_running_loop().call_later(0.05, busy_loop)
    guard = RequestGuard(app, ServeConfig(auth=False, body_timeout=DEADLINE), Admission(1))
    try:
        await guard(dict(SCOPE), receive, send)
    finally:
        writer.close()
        theirs.close()
    return sent, seen


def test_a_body_that_arrived_while_the_loop_was_held_past_the_deadline_is_read():
    sent, seen = asyncio.run(_guarded(busy_for=0.5))
    assert sent[0]["status"] == 200 and seen == [b"{}"]


def test_a_body_that_arrived_in_time_on_an_idle_loop_is_read():
    sent, seen = asyncio.run(_guarded(busy_for=0.0))
    assert sent[0]["status"] == 200 and seen == [b"{}"]
