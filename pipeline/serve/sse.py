"""Server-sent events: the encoding, and a response that notices a client leaving.

Starlette's ``StreamingResponse`` learns of a disconnect only when a write fails (ASGI 2.4), so
a client that leaves while a tool runs silently would not be noticed until the turn ends.
``EventStream`` listens for ``http.disconnect`` while it streams, and calls ``on_disconnect``
at once (the turn is interrupted then)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import Response

DONE = b"data: [DONE]\n\n"
# A comment line keeps proxies from closing a quiet stream (a long tool run).
KEEPALIVE = b": keep-alive\n\n"


def encode(data: Any, *, event: str | None = None) -> bytes:
    """One event: ``data`` as compact JSON (on one line, so one ``data:`` field)."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


class EventStream(Response):
    """A streamed response of ``body`` (bytes); ``on_disconnect`` runs when the client goes
    before the stream ends, ``on_end`` when the response is over, however it ended: a client
    gone before the first byte leaves ``body`` unstarted, and its own ``finally`` unrun."""

    media_type = "text/event-stream"

    def __init__(self, body: AsyncIterator[bytes], *, on_disconnect: Callable[[], object],
                 on_end: Callable[[], object] = lambda: None,
                 headers: dict[str, str] | None = None) -> None:
        # As StreamingResponse does: no body attribute, so no content-length.
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-cache", "x-accel-buffering": "no",
                           **(headers or {})})
        self.stream = body
        self.on_disconnect = on_disconnect
        self.on_end = on_end

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self._serve(receive, send)
        finally:
            self.on_end()

    async def _serve(self, receive: Any, send: Any) -> None:
        writer = asyncio.create_task(self._write(send))
        watcher = asyncio.create_task(self._watch(receive))
        done, _ = await asyncio.wait((writer, watcher), return_when=asyncio.FIRST_COMPLETED)
        (writer if watcher in done else watcher).cancel()
        gone = watcher in done
        for task in (writer, watcher):
            try:
                await task
            except asyncio.CancelledError:
                pass
            except OSError:  # a write to a closed connection
                gone = True
        if gone:
            self.on_disconnect()
        aclose = getattr(self.stream, "aclose", None)
        if aclose is not None:
            await aclose()

    async def _write(self, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        async for piece in self.stream:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _watch(receive: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
