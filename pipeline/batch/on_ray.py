"""The batch on Ray (the ``batch`` extra): each prompt is a Ray task that runs its session in a
scratch directory of the node it lands on and returns the session's logs; the driver writes
them into ``<out>/sessions``, so the logs of a whole cluster end up in one directory.

Without ``ray_address`` (and with no Ray already running in the process) a local Ray is
started with ``workers`` CPUs.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs

from effects.eventlog.envelope import SUFFIX
from effects.eventlog.keys import install_key, signing_key_file
from pipeline.batch.task import BatchJob, Task, TaskResult, run_task
from pipeline.ray_cluster import join_ray, run_bounded
from stages.errors import LogConflictError

__all__ = ["run_ray", "write_back"]


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


def run_ray(job: BatchJob, tasks: list[Task],
            progress: Callable[[int, int], None]) -> list[TaskResult]:
    if not tasks:
        return []
    ray = join_ray(job.ray_address, job.workers)
    remote = ray.remote(num_cpus=1)(_remote_task)
    results: list[TaskResult] = []
    root = job.out / "sessions"
    key = ray.put(signing_key_file(root))

    def collect(_: int, result: TaskResult) -> None:
        write_back(root, result.logs)
        results.append(attrs.evolve(result, logs=()))
        progress(len(results), len(tasks))

    run_bounded(ray, [functools.partial(remote.remote, job, task, key) for task in tasks],
                job.workers, collect)
    return results
