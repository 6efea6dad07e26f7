"""Reading and checking many logs for the insights index on a pool of processes.

Checking a log (its hash chain, seals and signatures) is the index update's CPU work, and logs
are independent: each worker checks its share of the logs into a scratch file of its own, and
the update then copies each log's checked lines and bookkeeping in the order of the logs, so
the index gets exactly what one process would have given it.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from pipeline.ray_cluster import OnRay

# Below this many bytes to read, starting a pool costs more than it saves.
PARALLEL_BYTES = 4_000_000

# One log's share of a worker's scratch file, and what its check found (``_Work``'s lists and
# counts for that log alone).
Piece = tuple[str, int, int, dict[str, Any]]
Plan = Callable[[Any, Path, str, Any, Any], None]


def chosen_jobs(jobs: int | None, planned_bytes: int, logs: int) -> int:
    """``jobs``; or, unset, one per core when there is enough to read to be worth a pool."""
    if jobs is not None:
        return max(1, min(jobs, logs))
    if planned_bytes < PARALLEL_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, logs))


def shards(sizes: dict[str, int], jobs: int) -> list[list[str]]:
    """The logs split in ``jobs`` shares of about the same bytes (largest first, each to the
    lightest share)."""
    loads = [0] * jobs
    out: list[list[str]] = [[] for _ in range(jobs)]
    for session_id in sorted(sizes, key=lambda s: (-sizes[s], s)):
        lightest = loads.index(min(loads))
        out[lightest].append(session_id)
        loads[lightest] += sizes[session_id]
    return [share for share in out if share]


def plan_share(plan: Plan, work_type: type, root: Path, share: list[tuple[str, Any]],
               scratch: Path, keyring_of: Callable[[Path], Any]) -> tuple[str, list[Piece]]:
    """Check ``share`` (pairs of a log and what the index knew of it) into a new scratch file;
    the file's name and each log's piece of it."""
    keyring = keyring_of(root)
    fd, name = tempfile.mkstemp(prefix=".scratch-", suffix=".part", dir=scratch)
    pieces: list[Piece] = []
    with os.fdopen(fd, "wb") as out:
        for session_id, known in share:
            work = work_type(out)
            start = out.tell()
            plan(work, root, session_id, known, keyring)
            found = {"rows": work.rows, "clear": work.clear, "kinds": work.kinds,
                     "problems": work.problems, "unsigned": work.unsigned, "added": work.added}
            pieces.append((session_id, start, out.tell(), found))
    return name, pieces


def in_pool(jobs: int, task: Callable[..., tuple[str, list[Piece]]],
            shares: list[list[tuple[str, Any]]], *args: Any) -> list[tuple[str, list[Piece]]]:
    """``task(*args_before, share, *args_after)`` for each share on ``jobs`` processes: forked
    (everything imported already), or from a fork server when this process runs threads (a
    fork would copy them half-way)."""
    method = "fork" if threading.active_count() == 1 else "forkserver"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["pipeline.insights.index"])
    plan, work_type, root, scratch, keyring_of = args
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(task, plan, work_type, root, share, scratch, keyring_of)
                   for share in shares]
        return [future.result() for future in futures]


def share_task(share: list[tuple[str, Any]], plan: Plan, work_type: type, root: Path,
               scratch: Path, keyring_of: Callable[[Path], Any]) -> tuple[str, list[Piece]]:
    """:func:`plan_share` as a Ray task (the share first, the rest sent once to all)."""
    from pipeline.ray_cluster import check_home
    check_home(root)
    return plan_share(plan, work_type, root, share, scratch, keyring_of)


def on_ray(ray: OnRay, jobs: int, shares: list[list[tuple[str, Any]]], *args: Any
           ) -> list[tuple[str, list[Piece]]]:
    """:func:`in_pool` on Ray workers; the scratch files are written next to the index, so
    the home (and the index) must be on storage every node sees."""
    from pipeline.ray_cluster import map_in_order
    return map_in_order(share_task, shares, *args, address=ray.address, workers=jobs)
