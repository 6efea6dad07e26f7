"""Closing an in-flight HTTP response from another thread (the runner's interrupt)."""

from __future__ import annotations

import functools
import socket
import threading
from typing import Any

from effects.protocols import CancelToken


def abort_on_cancel(response: Any, cancel: CancelToken | None) -> None:
    """Let ``cancel`` abort the open ``httpx2.Response`` from another thread by shutting its
    socket down: that wakes a read blocked on it and tells the server at once (a bare
    ``close()`` from another thread waits for the next bytes). The byte stream is wrapped so
    that the shutdown and the connection's return to the pool exclude each other (a pooled
    connection may carry another request). Without a socket (HTTP/2, another transport) the
    response is just closed."""
    if cancel is None:
        return
    held = _held_stream_type()(response.stream)
    response.stream = held

    def abort() -> None:
        with held.lock:
            if held.released:
                return
            extensions = response.extensions
            if extensions.get("http_version") != b"HTTP/2":  # HTTP/2 multiplexes requests
                sock = getattr(extensions.get("network_stream"), "get_extra_info",
                               lambda _: None)("socket")
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # the reader fails and closes the response
                    return
                except (AttributeError, OSError):  # no socket, or it is gone already
                    pass
        response.close()

    cancel.on_cancel(abort)


@functools.cache
def _held_stream_type() -> type:
    import httpx2

    class HeldStream(httpx2.SyncByteStream):
        """A response byte stream that records, under its lock, when the connection goes."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.lock, self.released = inner, threading.Lock(), False

        def __iter__(self) -> Any:
            return iter(self.inner)

        def __getattr__(self, name: str) -> Any:  # e.g. the SDK's tracing ``stream_observer``
            if name == "inner":
                raise AttributeError(name)
            return getattr(self.inner, name)

        def close(self) -> None:
            with self.lock:
                self.released = True
            self.inner.close()

    return HeldStream
