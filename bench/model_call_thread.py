"""What handing a model call to another thread costs: a new thread per call (before) against a
reused worker (``effects.workers``, now). Not part of the test suite; prints one line each.

    python bench/model_call_thread.py
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from effects.workers import submit  # noqa: E402

POLL = 0.02  # the runner's interrupt poll


def nothing() -> None:
    return None


def new_thread() -> None:
    worker = threading.Thread(target=nothing, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(POLL)


def reused_worker() -> None:
    job = submit(nothing)
    while not job.wait(POLL):
        pass


def main() -> int:
    calls, rounds = 2000, 5
    results: dict[str, list[float]] = {"new thread per call": [], "reused worker": []}
    for _ in range(rounds):
        for times, fn in zip(results.values(), (new_thread, reused_worker), strict=True):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - t0) / calls)
    print(f"load average {os.getloadavg()[0]:.2f}; median of {rounds} rounds of {calls} calls")
    for name, times in results.items():
        print(f"  {name:22} {statistics.median(times) * 1e6:8.1f} us per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
