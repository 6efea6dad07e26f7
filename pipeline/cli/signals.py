"""A signal that ends a command: the exit status it gives, and the handlers that let the
agent's turn end cleanly first."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

__all__ = ["EXIT_SIGNALLED", "signals_interrupt"]

EXIT_SIGNALLED = 128  # + the signal's number, as a shell reports it


@contextlib.contextmanager
def signals_interrupt(agent: Any) -> Iterator[list[int]]:
    """While the block runs, SIGINT and SIGTERM interrupt the agent's turn (which then ends
    cleanly, with an event, and stays resumable); the signals received are yielded. A second
    signal stops at once, as Ctrl-C always did."""
    received: list[int] = []

    def handle(signum: int, frame: object) -> None:
        del frame
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        agent.interrupt()

    caught = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, handle) for signum in caught}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
