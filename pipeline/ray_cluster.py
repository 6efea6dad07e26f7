"""The one path to Ray for every command that takes ``--backend ray``: ``batch`` and ``eval``
(which ship their sessions' logs to the tasks) and the whole-home work, ``replay --all``,
``export`` and the ``insights`` index (whose tasks read the home where it is, so the home must
be on storage every node sees: one machine, or a shared filesystem).

A cluster is joined by address, with Ray's token auth when it asks for it; without an address a
local Ray is started with ``workers`` CPUs.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from pipeline.ordered_work import WINDOW_PER_WORKER, in_order
from stages.errors import UsageError

__all__ = ["OnRay", "check_home", "iter_in_order", "join_ray", "map_in_order", "on_ray",
           "run_bounded", "start_local_ray"]


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


def run_bounded(ray: Any, submits: Sequence[Callable[[], Any]], workers: int,
                collect: Callable[[int, Any], None]) -> None:
    """Submit the tasks (each a function returning an object ref), at most ``workers`` in
    flight on a cluster of any size, and hand each result to ``collect`` with the task's
    position in ``submits`` as it comes."""
    queue = deque(enumerate(submits))
    pending: dict[Any, int] = {}
    while queue or pending:
        while queue and len(pending) < workers:
            index, submit = queue.popleft()
            pending[submit()] = index
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            collect(pending.pop(ref), ray.get(ref))


def iter_in_order(function: Callable[..., Any], items: Iterable[Any], *args: Any,
                  address: str | None, workers: int, window: int | None = None
                  ) -> Generator[Any]:
    """``function(item, *args)`` for every item as Ray tasks on the cluster at ``address``
    (else a local Ray of ``workers`` CPUs), each result yielded in the order of ``items`` as
    its turn comes, with at most ``window`` (default: two per worker, so that a worker has its
    next task while the driver waits for the one in front) submitted and not yet taken;
    those are cancelled when the caller stops early."""
    ray = join_ray(address, workers)
    remote = ray.remote(num_cpus=1)(function)
    shared = [ray.put(arg) for arg in args]  # sent once, not with every task
    yield from in_order(lambda item: remote.remote(item, *shared), ray.get, items,
                        window or WINDOW_PER_WORKER * workers, ray.cancel)


def map_in_order(function: Callable[..., Any], items: Sequence[Any], *args: Any,
                 address: str | None, workers: int) -> list[Any]:
    """:func:`iter_in_order`'s results as a list."""
    return list(iter_in_order(function, items, *args, address=address, workers=workers))


@attrs.frozen
class OnRay:
    """Run on Ray: the cluster at ``address`` (else a local Ray of ``workers`` CPUs, by
    default one per core here)."""

    address: str | None = None

    def workers(self, jobs: int | None) -> int:
        """``jobs``, else the CPUs of the cluster joined."""
        if jobs is not None:
            return jobs
        ray = join_ray(self.address, os.cpu_count() or 1)
        return max(1, int(ray.cluster_resources().get("CPU", 1)))


def check_home(root: Path) -> None:
    """In a task: the home is where the driver said (a node that does not see it must not
    report every session as missing)."""
    if not root.is_dir():
        raise UsageError(f"{root} is not on the Ray node {socket.gethostname()}: the whole-home "
                         "commands read the home where it is, so run them on one machine's "
                         "Ray or keep the home on a filesystem every node mounts")


def on_ray(args: Any) -> OnRay | None:
    """The ``--backend``/``--ray-address`` options of a whole-home command."""
    if args.backend != "ray":
        if args.ray_address:
            raise UsageError("--ray-address goes with --backend ray")
        return None
    return OnRay(args.ray_address)
