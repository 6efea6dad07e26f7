"""Serving the app with uvicorn: in the foreground (``mibyan serve``) or in a thread on an
ephemeral loopback port (tests, benchmarks, an application embedding the gateway)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from effects.logs import redact_loggers
from pipeline.serve.gateway_config import HEADER_TIMEOUT
from stages.errors import UsageError


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as exc:
        raise UsageError("mibyan serve needs the serve extra: pip install 'mibyan[serve]'"
                         ) from exc
    return uvicorn


def _protocols(head_timeout: float) -> dict[str, Any]:
    """uvicorn's protocols: HTTP/1.1 cutting a client slow to send its request's head, and
    no WebSocket (the gateway has no such route, and a browser opens WebSockets across origins
    without CORS: an upgrade stays a plain request, which the guard checks)."""
    from pipeline.serve.head_deadline import HeadDeadlineProtocol
    return {"http": functools.partial(HeadDeadlineProtocol, head_timeout=head_timeout),
            "ws": "none"}


class BackgroundServer:
    """``with BackgroundServer(app) as server: server.url`` -> ``http://127.0.0.1:<port>``."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0,
                 startup_timeout: float = 10.0, head_timeout: float = HEADER_TIMEOUT) -> None:
        uvicorn = _uvicorn()
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port,
                                                    log_level="warning", lifespan="on",
                                                    timeout_graceful_shutdown=5,
                                                    **_protocols(head_timeout)))
        redact_loggers(UVICORN_LOGGERS)
        self.host = host
        self.startup_timeout = startup_timeout
        self._thread = threading.Thread(target=self.server.run, name="mibyan-serve",
                                        daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the gateway did not start")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=30)


# Clients (the SDKs, chat UIs) keep connections between turns; uvicorn's 5 s would have them
# reconnect, all at once under load.
KEEP_ALIVE_SECONDS = 75


# uvicorn's own loggers: an unexpected error's traceback goes to "uvicorn.error".
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def run(app: Any, *, host: str, port: int, secrets: tuple[str, ...] = (),
        head_timeout: float = HEADER_TIMEOUT,
        bound: Callable[[int], None] | None = None,
        stopping: Callable[[], None] | None = None) -> None:
    """Serve until SIGINT or SIGTERM; uvicorn's log lines are redacted (``secrets`` too). A
    client has ``head_timeout`` seconds to send a request's head. ``bound`` is told the port
    once the socket is bound (``port=0`` asks the system for a free one); ``stopping`` is
    called on the first signal, before uvicorn waits for open connections: streams that would
    otherwise be cut after the graceful timeout (with a traceback) can end themselves."""
    uvicorn = _uvicorn()
    # The config sets uvicorn's logging up: the filters go on after it.
    config = uvicorn.Config(app, host=host, port=port, log_level="info",
                            timeout_graceful_shutdown=10, timeout_keep_alive=KEEP_ALIVE_SECONDS,
                            backlog=4096, **_protocols(head_timeout))
    redact_loggers(UVICORN_LOGGERS, secrets)
    sock = config.bind_socket()  # a port already taken: uvicorn says so and exits with 1
    if bound is not None:
        bound(sock.getsockname()[1])
    _server(config, stopping).run(sockets=[sock])


def _server(config: Any, stopping: Callable[[], None] | None) -> Any:
    """A uvicorn server that calls ``stopping`` once, when a signal first asks it to exit."""
    uvicorn = _uvicorn()

    class Server(uvicorn.Server):  # type: ignore[name-defined]
        def handle_exit(self, sig: int, frame: Any) -> None:
            if stopping is not None and not self.should_exit:
                stopping()
            super().handle_exit(sig, frame)
    return Server(config)
