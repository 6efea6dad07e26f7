"""The bodies of ``mibyan replay``, ``mibyan fork`` and ``mibyan diff`` (parsers in cli.py)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import attrs

from pipeline import config as cfg

EXIT_OK, EXIT_FAILED = 0, 1


def _root(args: argparse.Namespace) -> Path:
    return (args.home or cfg.home()) / "sessions"


def describe(report: Any, *, named: bool = False) -> list[str]:
    """A replay report: identical, or the first divergence with its stage and a field diff."""
    from pipeline.diff import field_diff
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
        return replay_all(_root(args))
    from pipeline.replay import replay as replay_session
    report = replay_session(_root(args), args.session)
    print("\n".join(describe(report)))
    return EXIT_OK if report.identical else EXIT_FAILED


@attrs.frozen(kw_only=True)
class ReplayAll:
    """Every session under a root replayed: how many, their events, the time taken, and
    for each one that did not hold its id and what went wrong (as printed)."""

    sessions: int
    events: int
    seconds: float
    failures: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def held(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        rate = f"{self.events / self.seconds:,.0f}" if self.seconds > 0 else "-"
        n, d = self.sessions, len(self.failures)
        return (f"{n} session{'s' if n != 1 else ''}, {self.events} events, "
                f"{d} divergence{'s' if d != 1 else ''}, {rate} events/s")


def replay_every(root: Path) -> ReplayAll:
    """Replay every session under ``root``; a log that cannot be read counts as a failure."""
    from effects.eventlog import list_session_ids
    from pipeline.replay import replay as replay_session
    from stages.errors import MibyanError
    sessions = events = 0
    failures: list[tuple[str, tuple[str, ...]]] = []
    started = time.perf_counter()
    for session_id in list_session_ids(root):
        sessions += 1
        try:
            report = replay_session(root, session_id)
        except MibyanError as exc:
            failures.append((session_id, (f"{session_id}: cannot replay: "
                                          f"{type(exc).__name__}: {exc}",)))
            continue
        events += report.events
        if not report.identical:
            failures.append((session_id, tuple(describe(report, named=True))))
    return ReplayAll(sessions=sessions, events=events, seconds=time.perf_counter() - started,
                     failures=tuple(failures))


def replay_all(root: Path) -> int:
    result = replay_every(root)
    for _, lines in result.failures:
        print("\n".join(lines))
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
    from effects.eventlog import read_envelopes, session_path
    from pipeline.agent import Agent
    from pipeline.fork import check_changes, fork_session
    from pipeline.toolsets import builtin_tools
    from stages.errors import UsageError
    changes = parse_sets(args.set)
    for name in ("model", "provider", "api_mode"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    check_changes(changes)
    root = _root(args)
    path = session_path(root, args.session)
    if not path.exists():
        raise UsageError(f"no session {args.session!r} under {root}")
    origin = next(read_envelopes(path)).payload["settings"]
    workdir = Path(args.workdir or Path.cwd())
    # The fork's client speaks to the endpoint the session ends with (or the one it is given).
    agent = Agent(model=changes.get("model", origin["model"]),
                  provider=changes.get("provider", origin["provider"]),
                  base_url=changes.get("base_url", origin["base_url"]),
                  api_mode=changes.get("api_mode"), home=args.home, cwd=workdir,
                  tools=builtin_tools(workdir), durability="durable")
    with agent:
        made = fork_session(agent, args.session, at=args.at, **changes)
        with made.agent:
            pass
    print(f"forked {made.origin_session_id} at seq {made.origin_seq}: {made.session_id}")
    if made.continued is not None:
        print(made.continued.final_response or f"({made.continued.turn_exit_reason})")
    return EXIT_OK


def diff(args: argparse.Namespace) -> int:
    from pipeline.diff import diff_sessions
    result = diff_sessions(_root(args), args.a, args.b)
    print("\n".join(result.lines()))
    return EXIT_OK
