"""Shaping the selected sessions of an export on many processes or Ray workers.

Sessions are independent once the keys to redact are known, so they go to the workers in
consecutive groups of about the same bytes, each no larger than ``GROUP_BYTES`` of log (or one
session), and come back in the order they went, group by group: the file written is the one a
single process writes. Memory stays bounded on both sides: a worker holds one group's samples,
and the driver holds a few groups per worker (``pipeline.ordered_work``), handing each to the
writer as its turn comes, whatever the size of the home. The workers read the home where it
is (on Ray: one machine's cluster, or a filesystem every node mounts).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.envelope import session_path
from pipeline.ordered_work import PARALLEL_BYTES, on_processes
from pipeline.ordered_work import groups_of as grouped
from pipeline.ray_cluster import OnRay, iter_in_order

__all__ = ["GROUP_BYTES", "PARALLEL_BYTES", "Shaped", "Shaping", "groups_of", "shape_home"]

# Log bytes per group at most: a group's samples are a worker's (and the driver's) memory,
# some tens of MB here; big enough that a task's few milliseconds of scheduling are nothing.
GROUP_BYTES = 4_000_000


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


def groups_of(sizes: dict[str, int], workers: int) -> list[list[str]]:
    """The sessions (in the order of ``sizes``) in consecutive groups of at most
    ``GROUP_BYTES`` (``pipeline.ordered_work.groups_of``)."""
    return grouped(sizes, workers, GROUP_BYTES)


def shape_home(task: Task, root: Path, session_ids: Sequence[str], shaping: Any, *,
               jobs: int | None, ray: OnRay | None) -> Iterator[list[Any]]:
    """``task(group, root, shaping)`` over ``session_ids`` in groups, each group's results
    yielded in the order of ``session_ids``: in this process, on ``jobs`` processes (unset:
    one per core when there is enough to read), or with ``ray`` on Ray workers."""
    ids = list(session_ids)
    if not ids:
        return iter(())
    sizes = {sid: _size(root, sid) for sid in ids}
    if ray is not None:
        workers = ray.workers(jobs)
        return iter_in_order(task, groups_of(sizes, workers), root, shaping,
                             address=ray.address, workers=workers)
    if jobs is None:
        jobs = (os.cpu_count() or 1) if sum(sizes.values()) >= PARALLEL_BYTES else 1
    jobs = min(jobs, len(ids))
    groups = groups_of(sizes, jobs)
    if jobs == 1:
        return (task(group, root, shaping) for group in groups)
    return on_processes(task, groups, root, shaping, jobs=jobs,
                        preload="pipeline.export.exporter")
