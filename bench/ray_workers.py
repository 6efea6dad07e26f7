"""Helpers of the benches on Ray: workers warmed before the clock starts, and the peak
resident set of a Ray job's workers, which are the raylet's children, not the
driver's (``RUSAGE_CHILDREN`` does not see them): a small task on each worker reads its own
``VmHWM``. Ray reuses a job's idle workers, so the probes land on those that did the work."""

from __future__ import annotations

import os
from typing import Any


def _peak() -> tuple[int, float]:
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return os.getpid(), int(line.split()[1]) / 1024


def worker_peaks_mb(ray: Any, workers: int) -> list[float]:
    """The peak RSS in MB of each worker process the probes reached, largest first."""
    probe = ray.remote(num_cpus=1)(_peak)
    found = dict(ray.get([probe.remote() for _ in range(workers * 4)]))
    return sorted(found.values(), reverse=True)


def _imported() -> int:
    import pipeline.export.exporter
    import pipeline.insights.index
    import pipeline.shell.replay  # noqa: F401
    return os.getpid()


def warm(ray: Any, workers: int) -> int:
    """Start the job's workers and import the whole-home work in each: what a long run pays
    once, left out of a measurement of throughput. The number of workers reached."""
    task = ray.remote(num_cpus=1)(_imported)
    return len(set(ray.get([task.remote() for _ in range(workers * 4)])))
