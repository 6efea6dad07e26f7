"""uvicorn's HTTP/1.1 protocol (h11) with a deadline for each request's head.

uvicorn (0.54) times nothing until a request has been answered: its ``timeout_keep_alive``
starts after a response, and any byte received cancels it. A client that connects and sends
nothing, or sends its headers a byte a second (slowloris), holds a connection and its memory
for as long as it likes; h11 bounds the head's size (16 KiB), not its time. Here a connection
has ``head_timeout`` seconds from its start, and a kept-alive one from the first byte of its
next request, to send a complete head; then it is closed. (The body's deadline is
``pipeline.serve.guard``'s: the app reads the body.)

    uvicorn.Config(app, http=functools.partial(HeadDeadlineProtocol, head_timeout=10.0))
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeadDeadlineProtocol(H11Protocol):
    def __init__(self, *args: Any, head_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timeout = head_timeout
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._head_deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of a kept-alive connection's next request
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # the head is complete (or broke h11)
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._head_deadline = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        """No complete head in time: the connection is closed without an answer (as nginx
        does with a slow head), since the client has shown no request to answer."""
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
