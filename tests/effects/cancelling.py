"""Cancelling an adapter's call from another thread, as the runner's interrupt does."""

from __future__ import annotations

import threading
import time

from effects.protocols import CancelToken


def cancelled_after(server, call, seconds: float = 0.3) -> tuple[list, float]:
    """Run ``call(token)`` on a worker thread and cancel ``token`` from this thread
    ``seconds`` after ``server`` got the request; the worker's outcome and how long it ran on
    after the cancel."""
    token = CancelToken()
    outcome: list = []

    def work() -> None:
        try:
            outcome.append(call(token))
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    deadline = time.perf_counter() + 10.0  # the first SDK import alone may take a while
    while not server.requests and time.perf_counter() < deadline:
        time.sleep(0.01)
    time.sleep(seconds)
    assert worker.is_alive() and not outcome, "the slow reply ended before the cancel"
    cancelled = time.perf_counter()
    token.cancel()
    worker.join(10.0)
    return outcome, time.perf_counter() - cancelled
