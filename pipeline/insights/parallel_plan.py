"""Reading and checking the logs for the insights index in bounded groups.

Checking a log (its hash chain, seals and signatures) is the update's CPU work, and logs are
independent: the logs to read go in consecutive groups, in the order of the logs, each of at
most ``GROUP_BYTES`` of log (or one log), and each group is checked into a scratch file of its
own, in this process or on a pool of processes or Ray workers. The groups come back in the
order they went, a few per worker handed out and not yet taken (``pipeline.ordered_work``), and
the update loads each into the index as its turn comes: the index gets exactly what one process
gives it, and memory stays bounded on both sides whatever the size of the home (a worker holds
one group's bookkeeping, the driver a window of them and DuckDB one group's records at a time).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import IO, Any

from pipeline.ordered_work import PARALLEL_BYTES, on_processes
from pipeline.ordered_work import groups_of as grouped
from pipeline.ray_cluster import OnRay, iter_in_order

# Log bytes per group at most: what DuckDB loads at once and a worker's bookkeeping; big enough
# that the driver's fixed cost per group (a few statements) is small against its records.
GROUP_BYTES = 16_000_000

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
    """The logs (in the order of ``sizes``) in consecutive groups of at most ``GROUP_BYTES``
    (``pipeline.ordered_work.groups_of``)."""
    return grouped(sizes, workers, GROUP_BYTES)


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
        # The scratch files are written next to the index: the home (and the index) must be
        # on storage every node sees.
        return iter_in_order(group_task, groups, *args, address=ray.address, workers=jobs)
    if jobs > 1:
        return on_processes(plan_group, groups, *args, jobs=jobs,
                            preload="pipeline.insights.index")
    return (plan_group(group, *args) for group in groups)


def group_task(group: Group, plan: Plan, found_type: type, root: Path, scratch: Path,
               keyring_of: Callable[[Path], Any]) -> Planned:
    """:func:`plan_group` as a Ray task, on a node that must see the home."""
    from pipeline.ray_cluster import check_home
    check_home(root)
    return plan_group(group, plan, found_type, root, scratch, keyring_of)
