"""The real clock and id source: the only places mibyan reads time or draws randomness."""

from __future__ import annotations

import datetime as dt
import random
import time
import uuid


class SystemClock:
    def now(self) -> str:
        return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")

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
        return uuid.uuid4().hex

    def fraction(self) -> float:
        return random.random()
