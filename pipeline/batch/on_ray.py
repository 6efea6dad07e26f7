"""The batch on Ray (the ``batch`` extra): each prompt is a Ray task that runs its session in a
scratch directory of the node it lands on and returns the session's logs; the driver writes
them into ``<out>/sessions``, so the logs of a whole cluster end up in one directory.

Without ``ray_address`` (and with no Ray already running in the process) a local Ray is
started with ``workers`` CPUs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.envelope import SUFFIX
from effects.eventlog.keys import install_key, signing_key_file
from pipeline.batch.task import BatchJob, Task, TaskResult, run_task
from stages.errors import LogConflictError, UsageError

__all__ = ["run_ray", "start_local_ray", "write_back"]


def _remote_task(job: BatchJob, task: Task, key: bytes) -> TaskResult:
    with tempfile.TemporaryDirectory(prefix="mibyan-batch-") as scratch:
        home = Path(scratch)
        # Signed with the batch home's key: the logs come back to a home that verifies them.
        install_key(home / "sessions", key)
        result = run_task(job, task, home=home)
        logs = tuple((path.name, path.read_bytes())
                     for path in sorted((home / "sessions").glob(f"*{SUFFIX}")))
    return attrs.evolve(result, logs=logs)


def write_back(root: Path, logs: tuple[tuple[str, bytes], ...]) -> None:
    """Write logs returned by a worker; a session already there is never overwritten."""
    root.mkdir(parents=True, exist_ok=True)
    for name, data in logs:
        path = root / Path(name).name
        try:
            with open(path, "xb") as fh:
                fh.write(data)
        except FileExistsError as exc:
            raise LogConflictError(f"a worker returned session log {name}, which exists "
                                   f"already in {root}") from exc


def start_local_ray(num_cpus: int, attempts: int = 5) -> None:
    """A local Ray. On a loaded machine its agents (Python processes) can take longer to come
    up than the raylet waits for them (it then aborts, and the driver gives up after a fixed
    30 s), so a start that failed is tried again."""
    import ray
    for attempt in range(attempts):
        try:
            ray.init(num_cpus=num_cpus, log_to_driver=False, include_dashboard=False)
            return
        except Exception:  # Ray raises a bare Exception for a start that timed out
            ray.shutdown()
            if attempt == attempts - 1:
                raise


def run_ray(job: BatchJob, tasks: list[Task],
            progress: Callable[[int, int], None]) -> list[TaskResult]:
    # Under `uv run`, Ray would start every worker through `uv run` (a sync per worker, which
    # fails offline and uploads the working tree); the workers use this interpreter instead.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        import ray
    except ImportError as exc:
        raise UsageError("--backend ray needs Ray: install mibyan[batch]") from exc
    if not tasks:
        return []
    if not ray.is_initialized():
        if job.ray_address:
            ray.init(address=job.ray_address, log_to_driver=False)
        else:
            start_local_ray(job.workers)
    remote = ray.remote(num_cpus=1)(_remote_task)
    queue = list(tasks)
    pending: dict[Any, Task] = {}
    results: list[TaskResult] = []
    root = job.out / "sessions"
    key = ray.put(signing_key_file(root))
    while queue or pending:
        # At most ``workers`` tasks in flight, on a cluster of any size.
        while queue and len(pending) < job.workers:
            task = queue.pop(0)
            pending[remote.remote(job, task, key)] = task
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            pending.pop(ref)
            result = ray.get(ref)
            write_back(root, result.logs)
            results.append(attrs.evolve(result, logs=()))
            progress(len(results), len(tasks))
    return results
