"""The bodies of ``mibyan replay``, ``mibyan fork`` and ``mibyan diff`` (parsers in cli.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import attrs

from pipeline import config as cfg
from pipeline.ordered_work import PARALLEL_BYTES
from pipeline.printable import printable
from pipeline.ray_cluster import OnRay, on_ray

EXIT_OK, EXIT_FAILED = 0, 1


def _root(args: argparse.Namespace) -> Path:
    return (args.home or cfg.home()) / "sessions"


def describe(report: Any, *, named: bool = False) -> list[str]:
    """A replay report: identical, or the first divergence with its stage and a field diff."""
    from pipeline.insights.diff import field_diff
    name = f"{report.session_id}: " if named else ""
    if report.divergence is None:
        return [f"{name}{report.describe()}"]
    d = report.divergence
    return [f"{name}diverged at seq {d.seq} in stage {d.stage}",
            *field_diff(d.expected, d.produced)]


def replay(args: argparse.Namespace) -> int:
    from stages.errors import UsageError
    if args.all == (args.session is not None):
        raise UsageError("name one SESSION to replay, or --all")
    if args.all:
        return replay_all(_root(args), jobs=args.jobs, ray=on_ray(args))
    from pipeline.shell.replay import replay as replay_session
    report = replay_session(_root(args), args.session)
    print(printable("\n".join(describe(report))))
    return EXIT_OK if report.identical else EXIT_FAILED


@attrs.frozen(kw_only=True)
class ReplayAll:
    """Every session under a root replayed: how many, their events, the time taken, and
    for each one that did not hold its id and what went wrong (as printed); the empty logs
    (files with no record, which earlier versions could leave) are skipped and named."""

    sessions: int
    events: int
    seconds: float
    failures: tuple[tuple[str, tuple[str, ...]], ...]
    empty: tuple[str, ...] = ()

    @property
    def held(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        rate = f"{self.events / self.seconds:,.0f}" if self.seconds > 0 else "-"
        n, d = self.sessions, len(self.failures)
        skipped = (f", {len(self.empty)} empty log{'s' if len(self.empty) != 1 else ''} "
                   "skipped" if self.empty else "")
        return (f"{n} session{'s' if n != 1 else ''}, {self.events} events, "
                f"{d} divergence{'s' if d != 1 else ''}{skipped}, {rate} events/s")


def _replay_one(root: Path, session_id: str) -> tuple[int, tuple[str, ...] | None]:
    """One session's replayed events and, when it did not hold, what went wrong (as printed);
    a log that cannot be read is a failure."""
    from pipeline.shell.replay import replay as replay_session
    from stages.errors import MibyanError
    try:
        report = replay_session(root, session_id)
    except MibyanError as exc:
        return 0, (f"{session_id}: cannot replay: {type(exc).__name__}: {exc}",)
    return report.events, None if report.identical else tuple(describe(report, named=True))


def replay_every(root: Path, *, jobs: int | None = None, ray: OnRay | None = None
                 ) -> ReplayAll:
    """Replay every session under ``root``: in this process, or (a large home, or ``jobs``)
    on a pool of processes, one per core, or with ``ray`` on ``jobs`` Ray workers (else one
    per CPU of the cluster); sessions are independent, so a pool scales."""
    from effects.eventlog.store import list_session_ids, session_path
    started = time.perf_counter()
    sizes: dict[str, int] = {}
    empty: list[str] = []
    for session_id in list_session_ids(root):
        try:
            size = session_path(root, session_id).stat().st_size
        except OSError:  # gone since it was listed: its replay says so
            sizes[session_id] = 0
            continue
        if size == 0:  # no record to replay (left by an earlier version): not a divergence
            empty.append(session_id)
        else:
            sizes[session_id] = size
    if ray is not None:
        outcomes = _on_ray(root, sizes, ray.workers(jobs), ray.address)
    else:
        if jobs is None:
            large = sum(sizes.values()) >= PARALLEL_BYTES
            jobs = min(os.cpu_count() or 1, len(sizes)) if large else 1
        outcomes = (_in_pool(root, sizes, jobs) if jobs > 1
                    else {s: _replay_one(root, s) for s in sizes})
    failures = tuple((s, lines) for s, (_, lines) in outcomes.items() if lines is not None)
    return ReplayAll(sessions=len(sizes), events=sum(n for n, _ in outcomes.values()),
                     seconds=time.perf_counter() - started, failures=failures,
                     empty=tuple(empty))


def _in_pool(root: Path, sizes: dict[str, int], jobs: int) -> Outcomes:
    import importlib
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    from effects.eventlog import codec
    # Before the fork: the workers start with the replay imported and the codec built.
    importlib.import_module("pipeline.shell.replay")
    codec.warm()
    # A fork starts at once, with everything imported; but a caller that runs threads would
    # be copied half-way, so it gets a fork server instead.
    method = "fork" if threading.active_count() == 1 else "forkserver"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["pipeline.shell.replay"])
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        # Largest first, so that one big session does not start last and run alone.
        futures = {s: pool.submit(_replay_one, root, s)
                   for s in sorted(sizes, key=sizes.__getitem__, reverse=True)}
        return {s: futures[s].result() for s in sizes}


Outcomes = dict[str, tuple[int, tuple[str, ...] | None]]


def replay_group(group: list[str], root: Path) -> Outcomes:
    """A Ray task: the replay of a few sessions, read where the home is."""
    from pipeline.ray_cluster import check_home
    check_home(root)
    return {s: _replay_one(root, s) for s in group}


def _on_ray(root: Path, sizes: dict[str, int], workers: int, address: str | None) -> Outcomes:
    from pipeline.ordered_work import by_bytes
    from pipeline.ray_cluster import map_in_order
    # Largest first (one big session does not start last and run alone), in tasks of about
    # a quarter of a worker's share.
    largest = dict(sorted(sizes.items(), key=lambda item: item[1], reverse=True))
    groups = by_bytes(largest, workers * 4)
    done: Outcomes = {}
    for outcomes in map_in_order(replay_group, groups, root, address=address, workers=workers):
        done.update(outcomes)
    return {s: done[s] for s in sizes}


def replay_all(root: Path, *, jobs: int | None = None, ray: OnRay | None = None) -> int:
    result = replay_every(root, jobs=jobs, ray=ray)
    for _, lines in result.failures:
        print(printable("\n".join(lines)))
    for session_id in result.empty:
        print(printable(f"{session_id}: empty log (no record), skipped"), file=sys.stderr)
    print(result.summary())
    return EXIT_OK if result.held else EXIT_FAILED


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``--set key=value`` pairs; a value is read as JSON when it parses (numbers, true,
    null, lists), else kept as text."""
    from stages.errors import UsageError
    values: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set takes key=value, got {item!r}")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        values[key.strip()] = tuple(value) if isinstance(value, list) else value
    return values


def fork(args: argparse.Namespace) -> int:
    from pipeline.agent import Agent, fork_session
    from pipeline.cli.cmd_rollback import restored_line
    from pipeline.cli.turn_lines import TurnLines, usage_line
    from pipeline.shell.fork import plan_fork
    from pipeline.toolsets import builtin_tools
    changes = parse_sets(args.set)
    for name in ("model", "provider", "api_mode"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    # The fork's client speaks to the endpoint in force where the fork goes on: the fold of
    # the records it keeps (a resume or an earlier fork may have changed the origin's first
    # settings), with the changes given here.
    settings = plan_fork(_root(args), args.session, args.at, changes).settings
    workdir = Path(args.workdir or Path.cwd())
    agent = Agent(model=settings.model, provider=settings.provider, base_url=settings.base_url,
                  api_mode=changes.get("api_mode"), home=args.home, cwd=workdir,
                  tools=builtin_tools(workdir), durability="durable",
                  event_listener=TurnLines())
    with agent:
        made = fork_session(agent, args.session, at=args.at, restore_tree=args.restore_tree,
                            **changes)
        with made.agent:
            pass
    print(f"forked {made.origin_session_id} at seq {made.origin_seq}: {made.session_id}")
    if made.restored is not None:
        print(printable(restored_line(made.restored)))
    if made.continued is not None:
        print(printable(made.continued.final_response
                        or f"({made.continued.turn_exit_reason})"))
        print(usage_line(made.continued.as_dict()), file=sys.stderr)
    return EXIT_OK


def diff(args: argparse.Namespace) -> int:
    from pipeline.insights.diff import diff_sessions
    result = diff_sessions(_root(args), args.a, args.b)
    print(printable("\n".join(result.lines())))
    return EXIT_OK
