"""Shaping the selected sessions of an export on many processes or Ray workers.

Sessions are independent once the keys to redact are known, so they go to the workers in
consecutive groups of about the same bytes and come back in the order they went: the file
written is the one a single process writes. The workers read the home where it is (on Ray:
one machine's cluster, or a filesystem every node mounts); the driver holds the samples only.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.envelope import session_path
from pipeline.ray_cluster import OnRay, by_bytes, map_in_order

__all__ = ["PARALLEL_BYTES", "Shaped", "Shaping", "shape_home"]

# Below this much log a process pool costs more to start than it saves.
PARALLEL_BYTES = 4_000_000
# Groups per worker: small enough that the last ones balance the workers' loads.
GROUPS_PER_WORKER = 4

@attrs.frozen(kw_only=True)
class Shaping:
    """How every session is shaped, the same in every worker."""

    fmt: str
    lineage: str
    trainable_only: bool
    known: tuple[str, ...]  # the keys to redact


@attrs.frozen(kw_only=True)
class Shaped:
    """One selected session shaped: its samples, or why its log could not be read, or why
    its samples were left out (an image missing from the blob store)."""

    session_id: str
    labels: frozenset[str] = frozenset()  # the credential labels its turns name
    rows: tuple[dict[str, Any], ...] = ()
    redacted: int = 0
    read_error: str | None = None
    blob_error: str | None = None


Task = Callable[[list[str], Path, Any], list[Any]]


def _size(root: Path, session_id: str) -> int:
    try:
        return session_path(root, session_id).stat().st_size
    except OSError:  # gone since it was selected: its task says so
        return 0


def shape_home(task: Task, root: Path, session_ids: Sequence[str], shaping: Any, *,
               jobs: int | None, ray: OnRay | None) -> list[Any]:
    """``task(group, root, shaping)`` over ``session_ids`` in groups, its results joined in
    the order of ``session_ids``: in this process, on ``jobs`` processes (unset: one per core
    when there is enough to read), or with ``ray`` on Ray workers."""
    ids = list(session_ids)
    if not ids:
        return []
    sizes = {sid: _size(root, sid) for sid in ids}
    if ray is not None:
        workers = ray.workers(jobs)
        groups = by_bytes(sizes, workers * GROUPS_PER_WORKER)
        shares = map_in_order(task, groups, root, shaping, address=ray.address,
                              workers=workers)
        return list(itertools.chain.from_iterable(shares))
    if jobs is None:
        jobs = (os.cpu_count() or 1) if sum(sizes.values()) >= PARALLEL_BYTES else 1
    jobs = min(jobs, len(ids))
    if jobs == 1:
        return task(ids, root, shaping)
    groups = by_bytes(sizes, jobs * GROUPS_PER_WORKER)
    # A fork starts at once with everything imported; a caller running threads would be
    # copied half-way, so it gets a fork server.
    method = "fork" if threading.active_count() == 1 else "forkserver"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["pipeline.export.exporter"])
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        done = pool.map(task, groups, itertools.repeat(root), itertools.repeat(shaping))
        return list(itertools.chain.from_iterable(done))
