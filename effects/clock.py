"""The real clock and id source: the only places mibyan reads time or draws randomness."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
import uuid


class SystemClock:
    def __init__(self) -> None:
        # The second last read and its text up to the fraction: every record a turn writes
        # reads the clock, mostly within one second, and formatting a datetime is most of a
        # reading's cost.
        self._second: tuple[int, str] = (-1, "")

    def now(self) -> str:
        """UTC as ``datetime.now(UTC).isoformat(timespec="microseconds")`` writes it (which
        also floors the system clock to whole microseconds)."""
        second, micro = divmod(time.time_ns() // 1000, 1_000_000)
        known, head = self._second
        if second != known:
            whole = dt.datetime.fromtimestamp(second, dt.UTC).isoformat(timespec="seconds")
            head = whole.removesuffix("+00:00") + "."
            self._second = (second, head)
        return f"{head}{micro:06d}+00:00"

    def monotonic(self) -> float:
        return time.monotonic()

    def epoch(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class RandomIds:
    def session_id(self) -> str:
        """``YYYYmmdd_HHMMSS_<6 hex>``: sortable by start time, unique enough per machine."""
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d_%H%M%S")
        return f"{stamp}_{uuid.uuid4().hex[:6]}"

    def new_id(self) -> str:
        """``uuid.uuid4().hex`` without building a ``UUID`` (two a turn)."""
        raw = bytearray(os.urandom(16))
        raw[6] = raw[6] & 0x0F | 0x40  # version 4
        raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
        return raw.hex()

    def fraction(self) -> float:
        return random.random()
