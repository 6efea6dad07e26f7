"""The small Protocols every effect sits behind. SDK types never cross them."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Protocol

from stages.decision import AskApproval, ModelRequest
from stages.log.events import ApprovalAnswered, ApprovalsPending, ModelReplied

DeltaSink = Callable[[str], None]


class ModelClient(Protocol):
    """One provider API. Returns the reply as the event to record; raises ``ProviderError``
    (or ``ModelBehaviourError`` for an unusable reply) on failure.

    ``on_delta`` receives the visible text as it streams. The shipped adapters also take
    ``on_reasoning`` (the reasoning as it streams); the runner passes it only to a caller that
    listens for reasoning, so a client without it keeps working. A client whose call stops
    at once when ``cancel`` is cancelled from another thread or a signal handler may say so
    with ``stops_on_cancel(request) -> bool``: its calls then run on the caller's thread (no
    worker; ``effects.model_call``)."""

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None) -> ModelReplied:
        ...


class Approvals(Protocol):
    """Answers whether a call that needs approval may run (``pipeline.shell.approval.Approver``),
    or, where the turn ``may_pause``, leaves it pending (``ApprovalsPending``)."""

    def answer(self, ask: AskApproval, *, may_pause: bool = False
               ) -> ApprovalAnswered | ApprovalsPending:
        ...


class Clock(Protocol):
    def now(self) -> str:
        """The wall time as ISO-8601 UTC text."""
        ...

    def monotonic(self) -> float:
        ...

    def epoch(self) -> float:
        """Seconds since the Unix epoch (cooldowns and rate-limit resets are counted in it)."""
        ...

    def sleep(self, seconds: float) -> None:
        ...


class IdSource(Protocol):
    def session_id(self) -> str:
        ...

    def new_id(self) -> str:
        ...

    def fraction(self) -> float:
        """A random number in [0, 1) (backoff jitter)."""
        ...


class CancelToken:
    """Lets the runner close an in-flight request from another thread, or from a signal
    handler on the calling thread itself (hence the re-entrant lock). Adapters register how to
    abort (close the HTTP response) as soon as they have something to close."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._callbacks: list[Callable[[], object]] = []
        self.cancelled = False

    def on_cancel(self, callback: Callable[[], object]) -> None:
        with self._lock:
            if not self.cancelled:
                self._callbacks.append(callback)
                return
        _quietly(callback)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _quietly(callback)


class Interrupt(threading.Event):
    """An agent's interrupt. While a model call runs on the thread it would interrupt (no
    worker to walk away from), setting it also cancels that call's token, which shuts the
    call's socket down; safe from any thread and from a signal handler."""

    def __init__(self) -> None:
        super().__init__()
        self.call: CancelToken | None = None  # the call running on the interrupted thread

    def set(self) -> None:
        super().set()
        call = self.call
        if call is not None:
            call.cancel()


def _quietly(callback: Callable[[], object]) -> None:
    # Closing a dying connection may fail in any way.
    with contextlib.suppress(Exception):
        callback()
