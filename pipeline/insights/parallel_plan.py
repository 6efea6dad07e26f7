"""Reading and checking the logs for the insights index in bounded groups.

Checking a log (its hash chain, seals and signatures) is the update's CPU work, and logs are
independent: the logs to read go in consecutive groups, in the order of the logs, each of at
most ``GROUP_BYTES`` of log (or one log), and each group is checked into a scratch file of its
own, in this process or on a pool of processes or Ray workers. The groups come back in the
order they went, at most ``WINDOW_PER_WORKER`` per worker handed out and not yet taken, and the
update loads each into the index as its turn comes: the index gets exactly what one process
gives it, and memory stays bounded on both sides whatever the size of the home (a worker holds
one group's bookkeeping, the driver a window of them and DuckDB one group's records at a time).
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import IO, Any

from pipeline.ray_cluster import OnRay, by_bytes, join_ray

# Below this many bytes to read, starting a pool costs more than it saves.
PARALLEL_BYTES = 4_000_000
# Groups per worker at least: small enough that the last ones balance the workers' loads.
GROUPS_PER_WORKER = 4
# Log bytes per group at most: what DuckDB loads at once and a worker's bookkeeping; big enough
# that the driver's fixed cost per group (a few statements) is small against its records.
GROUP_BYTES = 16_000_000
# Groups handed out per worker and not yet loaded: enough to keep a worker busy while the
# driver loads the group in front, few enough to bound what waits (and its scratch files).
WINDOW_PER_WORKER = 2

# ``plan(out, found, root, session_id, known, keyring)``: check one log, its checked lines to
# ``out``, its bookkeeping to ``found``.
Plan = Callable[[IO[bytes], Any, Path, str, Any, Any], None]
# The logs of a group, each with what the index knew of it.
Group = list[tuple[str, Any]]
# A group's scratch file and what its check found.
Planned = tuple[str, Any]


def chosen_jobs(jobs: int | None, planned_bytes: int, logs: int) -> int:
    """``jobs``; or, unset, one per core when there is enough to read to be worth a pool."""
    if jobs is not None:
        return max(1, min(jobs, logs))
    if planned_bytes < PARALLEL_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, logs))


def groups_of(sizes: dict[str, int], workers: int) -> list[list[str]]:
    """The logs (in the order of ``sizes``) in consecutive groups: at least
    ``GROUPS_PER_WORKER`` per worker when there are several, none over ``GROUP_BYTES`` unless
    it is one log."""
    parts = (workers * GROUPS_PER_WORKER if workers > 1 else 1)
    return by_bytes(sizes, max(parts, -(-sum(sizes.values()) // GROUP_BYTES)))


def plan_group(group: Group, plan: Plan, found_type: type, root: Path, scratch: Path,
               keyring_of: Callable[[Path], Any]) -> Planned:
    """Check ``group`` into a new scratch file under ``scratch``: its name and what was
    found."""
    keyring = keyring_of(root)
    found = found_type()
    fd, name = tempfile.mkstemp(prefix="group-", suffix=".part", dir=scratch)
    with os.fdopen(fd, "wb") as out:
        for session_id, known in group:
            plan(out, found, root, session_id, known, keyring)
    return name, found


def planned_groups(groups: Iterable[Group], *args: Any, jobs: int,
                   ray: OnRay | None) -> Generator[Planned]:
    """:func:`plan_group` of each group (``args``: the rest of its arguments), in the order of
    ``groups``: here, on ``jobs`` processes, or with ``ray`` on ``jobs`` Ray workers."""
    if ray is not None:
        return _on_ray(groups, args, ray.address, jobs)
    if jobs > 1:
        return _on_processes(groups, args, jobs)
    return (plan_group(group, *args) for group in groups)


def in_order(submit: Callable[[Group], Any], result: Callable[[Any], Planned],
             cancel: Callable[[Any], Any], groups: Iterable[Group],
             window: int) -> Generator[Planned]:
    """Each group's result in the order of ``groups``, at most ``window`` submitted and not yet
    taken: ``submit(group)`` starts one and gives a handle, ``result(handle)`` waits for it,
    ``cancel(handle)`` drops one not taken when the caller stops early."""
    pending: deque[Any] = deque()
    todo = iter(groups)
    try:
        while True:
            for group in todo:
                pending.append(submit(group))
                if len(pending) >= window:
                    break
            if not pending:
                return
            yield result(pending.popleft())
    finally:
        for handle in pending:
            cancel(handle)


def _on_processes(groups: Iterable[Group], args: tuple, jobs: int) -> Generator[Planned]:
    # A fork starts at once with everything imported; a caller running threads would be
    # copied half-way, so it gets a fork server.
    method = "fork" if threading.active_count() == 1 else "forkserver"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["pipeline.insights.index"])
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        yield from in_order(lambda group: pool.submit(plan_group, group, *args),
                            Future.result, Future.cancel, groups, jobs * WINDOW_PER_WORKER)


def group_task(group: Group, plan: Plan, found_type: type, root: Path, scratch: Path,
               keyring_of: Callable[[Path], Any]) -> Planned:
    """:func:`plan_group` as a Ray task, on a node that must see the home."""
    from pipeline.ray_cluster import check_home
    check_home(root)
    return plan_group(group, plan, found_type, root, scratch, keyring_of)


def _on_ray(groups: Iterable[Group], args: tuple, address: str | None,
            workers: int) -> Generator[Planned]:
    """The groups on Ray workers; the scratch files are written next to the index, so the
    home (and the index) must be on storage every node sees."""
    ray = join_ray(address, workers)
    remote = ray.remote(num_cpus=1)(group_task)
    shared = [ray.put(arg) for arg in args]  # sent once, not with every task
    yield from in_order(lambda group: remote.remote(group, *shared), ray.get, ray.cancel,
                        groups, workers * WINDOW_PER_WORKER)
