"""Work over a home's logs handed out in order: the logs in consecutive groups of bounded size,
each group done here, on a pool of processes or on Ray workers, and each group's result taken
in the order of the groups, with a few groups handed out and not yet taken. So a worker holds
one group and the driver a window of them however big the home is, and what comes out is what
one process gives. The export (``pipeline.export.parallel``) and the insights index
(``pipeline.insights.parallel_plan``) go through here; Ray's side is
``pipeline.ray_cluster.iter_in_order``.
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

__all__ = ["GROUPS_PER_WORKER", "PARALLEL_BYTES", "WINDOW_PER_WORKER", "by_bytes", "groups_of",
           "in_order", "on_processes"]

# Below this much log to read, starting a pool of workers costs more than it saves.
PARALLEL_BYTES = 4_000_000

# Groups per worker at least: small enough that the last ones balance the workers' loads.
GROUPS_PER_WORKER = 4
# Groups handed out per worker and not yet taken: enough to keep a worker busy while the
# driver takes the group in front, few enough to bound what waits.
WINDOW_PER_WORKER = 2


def by_bytes(sizes: dict[str, int], parts: int) -> list[list[str]]:
    """The sessions in about ``parts`` consecutive groups of about the same bytes (in the
    order of ``sizes``): tasks of a few sessions each, not one each (a Ray task costs a few
    milliseconds of scheduling), and enough of them to keep every worker busy to the end."""
    target = max(1, sum(sizes.values()) // max(1, parts))
    groups: list[list[str]] = [[]]
    load = 0
    for session_id, size in sizes.items():
        if groups[-1] and load + size > target:
            groups.append([])
            load = 0
        groups[-1].append(session_id)
        load += size
    return [group for group in groups if group]


def groups_of(sizes: dict[str, int], workers: int, group_bytes: int) -> list[list[str]]:
    """The logs (in the order of ``sizes``) in consecutive groups: at least
    ``GROUPS_PER_WORKER`` per worker when there are several, none over ``group_bytes`` unless
    it is one log."""
    parts = workers * GROUPS_PER_WORKER if workers > 1 else 1
    return by_bytes(sizes, max(parts, -(-sum(sizes.values()) // group_bytes)))


def in_order(submit: Callable[[Any], Any], result: Callable[[Any], Any], items: Iterable[Any],
             window: int, cancel: Callable[[Any], Any] | None = None) -> Generator[Any]:
    """Each item's result in the order of ``items``, at most ``window`` submitted and not yet
    taken: ``submit(item)`` starts one and gives a handle, ``result(handle)`` waits for it,
    ``cancel(handle)`` drops one not taken when the caller stops early."""
    pending: deque[Any] = deque()
    todo = iter(items)
    try:
        for item in itertools.islice(todo, window):
            pending.append(submit(item))
        while pending:
            done = result(pending.popleft())
            for item in itertools.islice(todo, 1):
                pending.append(submit(item))
            yield done
    finally:
        if cancel is not None:
            for handle in pending:
                cancel(handle)


def on_processes(function: Callable[..., Any], items: Iterable[Any], *args: Any, jobs: int,
                 preload: str) -> Generator[Any]:
    """``function(item, *args)`` for every item on a pool of ``jobs`` processes, in the order of
    ``items`` (see :func:`in_order`); ``preload``: the module a fork server imports first."""
    # A fork starts at once with everything imported; a caller running threads would be
    # copied half-way, so it gets a fork server.
    method = "fork" if threading.active_count() == 1 else "forkserver"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload([preload])
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context)
    try:
        yield from in_order(lambda item: pool.submit(function, item, *args), Future.result,
                            items, jobs * WINDOW_PER_WORKER, Future.cancel)
    finally:  # also when the caller gave up half-way: the items not started are dropped
        pool.shutdown(cancel_futures=True)
