"""The batch on Ray (the ``batch`` extra): each prompt is a Ray task that runs its session in a
scratch directory of the node it lands on and returns the session's logs; the driver writes
them into ``<out>/sessions``, so the logs of a whole cluster end up in one directory.

Without ``ray_address`` (and with no Ray already running in the process) a local Ray is
started with ``workers`` CPUs.
"""

from __future__ import annotations

import functools
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.envelope import SUFFIX
from effects.eventlog.keys import install_key, signing_key_file
from pipeline.batch.task import BatchJob, Task, TaskResult, run_task
from stages.errors import LogConflictError, UsageError

__all__ = ["join_ray", "run_bounded", "run_ray", "start_local_ray", "write_back"]


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _check_reachable(address: str) -> None:
    """Ray retries an address where nothing listens for minutes, printing warnings; one TCP
    connection says at once whether the cluster's GCS port answers."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", a name Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise UsageError(f"cannot join the Ray cluster at {address}: nothing answers there "
                         f"({exc.strerror or exc})") from None


def join_ray(address: str | None, workers: int) -> Any:
    """The ``ray`` module, joined to the cluster at ``address`` (else a local Ray with
    ``workers`` CPUs), unless this process is in one already. A secured cluster is joined with
    Ray's own token auth: ``RAY_AUTH_MODE=token`` and the token in ``RAY_AUTH_TOKEN`` (or the
    file named by ``RAY_AUTH_TOKEN_PATH``, or ``~/.ray/auth_token``). A cluster that cannot be
    joined is a :class:`UsageError` naming the address, not Ray's traceback."""
    # Under `uv run`, Ray would start every worker through `uv run` (a sync per worker, which
    # fails offline and uploads the working tree); the workers use this interpreter instead.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    if address:
        _check_reachable(address)
    try:
        import ray
    except ImportError as exc:
        raise UsageError("--backend ray needs Ray: install mibyan[batch]") from exc
    if ray.is_initialized():
        return ray
    if not address:
        start_local_ray(workers)
        return ray
    try:
        ray.init(address=address, log_to_driver=False)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, its own errors
        ray.shutdown()
        hint = ""
        if "auth" in str(exc).lower() or type(exc).__name__.startswith("Authentication"):
            hint = (" (the cluster asks for a token: set RAY_AUTH_MODE=token and "
                    "RAY_AUTH_TOKEN, or RAY_AUTH_TOKEN_PATH)")
        raise UsageError(f"cannot join the Ray cluster at {address}: "
                         f"{_first_line(exc)}{hint}") from None
    return ray


def run_bounded(ray: Any, submits: list[Callable[[], Any]], workers: int,
                collect: Callable[[Any], None]) -> None:
    """Submit the tasks (each a function returning an object ref), at most ``workers`` in
    flight on a cluster of any size, and hand each result to ``collect`` as it comes."""
    queue = list(submits)
    pending: set[Any] = set()
    while queue or pending:
        while queue and len(pending) < workers:
            pending.add(queue.pop(0)())
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            pending.discard(ref)
            collect(ray.get(ref))


def run_ray(job: BatchJob, tasks: list[Task],
            progress: Callable[[int, int], None]) -> list[TaskResult]:
    if not tasks:
        return []
    ray = join_ray(job.ray_address, job.workers)
    remote = ray.remote(num_cpus=1)(_remote_task)
    results: list[TaskResult] = []
    root = job.out / "sessions"
    key = ray.put(signing_key_file(root))

    def collect(result: TaskResult) -> None:
        write_back(root, result.logs)
        results.append(attrs.evolve(result, logs=()))
        progress(len(results), len(tasks))

    run_bounded(ray, [functools.partial(remote.remote, job, task, key) for task in tasks],
                job.workers, collect)
    return results
