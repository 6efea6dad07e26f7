"""``Admission``: how many turns the gateway lets in at once, and when a refused client should
come back.

At most ``max_busy`` turns run or wait for a thread at once; one more is refused (503) rather
than queued, since every turn let into a CPU-bound gateway slows all the others. A fixed
``Retry-After`` made every refused client come back at the same moment and be refused again, so
that under a thousand clients answering refusals became the gateway's main work. Here each
refusal is given its own return time on a virtual schedule (the Generic Cell Rate Algorithm's):
the slots are spaced by the gateway's measured rate of turns when full, ``max_busy`` over the
mean turn time, so the refused come back about when a turn has ended for each of them, and the
wait grows with the number refused and shrinks as time passes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

# Turns per core let in at once by default. On two cores with an upstream that answers at once
# and a thousand clients, 8 turns at once kept the admitted turns' median at 0.24 s where 32
# made it 7 s (the turn threads starve the event loop of the GIL) and ended more turns a
# second (bench/README.md, issue 29); an upstream that takes seconds leaves the threads
# waiting on the network, and a gateway for one should set [serve] max_busy higher.
TURNS_PER_CORE = 4
# The mean turn time assumed before any turn has ended: about one turn of a real provider.
FIRST_TURN_SECONDS = 2.0
# How much each ended turn moves the mean (an exponentially weighted one: recent turns count).
WEIGHT = 0.2
# The openai SDKs honour a Retry-After of up to 60 s (older) or 120 s (newer), and back off on
# their own past it: the wait told is never longer.
MAX_RETRY_AFTER = 60.0
# A refused client is not asked back sooner: a retry costs a connection's worth of work.
MIN_RETRY_AFTER = 0.5


def default_max_busy(cores: int | None = None) -> int:
    """``TURNS_PER_CORE`` for each core this process may run on."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return TURNS_PER_CORE * max(cores or os.cpu_count() or 1, 1)


class Full(Exception):
    """The turn is refused; ``retry_after`` seconds is when its client should come back."""

    def __init__(self, limit: int, retry_after: float) -> None:
        super().__init__(limit, retry_after)
        self.limit = limit
        self.retry_after = retry_after


class Admission:
    """Thread-safe: turns end in worker threads, and are let in on the event loop."""

    def __init__(self, max_busy: int, *, max_retry_after: float = MAX_RETRY_AFTER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_busy = max_busy
        self.max_retry_after = max_retry_after
        self.busy = 0  # turns running or waiting for a thread
        self.refused = 0
        self.turn_seconds = FIRST_TURN_SECONDS
        self._clock = clock
        self._next_slot = 0.0  # when the last refused client was told to come back
        self._lock = threading.Lock()

    def full(self) -> bool:
        """Whether a turn would be refused now (no lock: a hint for refusing early; ``enter``
        decides)."""
        return self.busy >= self.max_busy

    def enter(self) -> float:
        """Let a turn in, and the time it started (for ``leave``); ``Full`` past the limit."""
        with self._lock:
            now = self._clock()
            if self.busy < self.max_busy:
                self.busy += 1
                return now
            raise Full(self.max_busy, self._refuse(now))

    def refuse(self) -> Full:
        """A turn refused before it was offered to ``enter`` (the limit was seen reached)."""
        with self._lock:
            return Full(self.max_busy, self._refuse(self._clock()))

    def leave(self, started: float) -> None:
        """The turn let in at ``started`` ended (or was cancelled before it ran)."""
        with self._lock:
            self.busy -= 1
            took = max(self._clock() - started, 0.0)
            self.turn_seconds += WEIGHT * (took - self.turn_seconds)

    def _refuse(self, now: float) -> float:
        """The seconds to the next free return slot: a turn's share of the full gateway after
        the last slot given, or after now once the refused have all come back."""
        self.refused += 1
        slot = max(self._next_slot, now) + self.turn_seconds / self.max_busy
        self._next_slot = min(max(slot, now + MIN_RETRY_AFTER), now + self.max_retry_after)
        return self._next_slot - now
