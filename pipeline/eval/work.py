"""One fork of an evaluation and how it runs, in a worker process, thread or Ray task: fork the
recorded session at its point onto the configuration, and measure what the fork did up to the
end of that turn."""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.keys import install_key
from effects.eventlog.store import read_envelopes, session_path
from pipeline.batch.task import digest, work_dir_name
from pipeline.eval.outcome import Outcome, measure
from pipeline.eval.points import ForkPoint
from pipeline.eval.spec import Configuration
from stages.errors import MibyanError, UsageError

__all__ = ["ForkJob", "ForkResult", "run_fork", "run_fork_elsewhere"]


@attrs.frozen(kw_only=True)
class ForkJob:
    point: ForkPoint
    config: Configuration
    # The recorded session's model, provider and endpoint: the agent the fork is made through
    # starts from them, the configuration's changes apply on top.
    base: tuple[tuple[str, Any], ...]
    tools: tuple[Any, ...] = ()


@attrs.frozen(kw_only=True)
class ForkResult:
    job: ForkJob
    fork_session_id: str | None
    outcome: Outcome | None
    error: str | None = None
    logs: tuple[tuple[str, bytes], ...] = ()  # Ray: the fork's log, written back by the driver


def _resolve(item: Any) -> Any:
    """A tool, or its ``module:name`` (how tools reach worker processes and Ray nodes)."""
    if not isinstance(item, str):
        return item
    module, _, name = item.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"cannot import the tool {item!r}: {exc}") from exc


def _tools(job: ForkJob, workdir: Path) -> Any:
    if job.config.toolsets is None:
        return [_resolve(item) for item in job.tools]
    from pipeline.toolsets import builtin_tools
    return builtin_tools(workdir, toolsets=job.config.toolsets)


def _measured(root: Path, session_id: str) -> Outcome:
    log = list(read_envelopes(session_path(root, session_id)))
    switch = next(i for i, e in enumerate(log) if e.kind == "session_forked")
    return measure((e.kind, e.payload) for e in log[switch + 1:])


def run_fork(job: ForkJob, home: Path) -> ForkResult:
    """Fork ``job``'s session (a log under ``<home>/sessions``) and measure the fork."""
    from pipeline.agent import Agent, fork_session
    point = job.point
    name = f"{job.config.name}-{point.session_id}-{point.at}"
    workdir = home / "work" / work_dir_name(f"{name[:60]}-{digest(name)}")
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        with Agent(**dict(job.base), home=home, cwd=workdir, tools=_tools(job, workdir),
                   stream=False, durability="flush", checkpoints=False) as agent:
            fork = fork_session(agent, point.session_id, at=point.at, **job.config.changes)
            with fork.agent:
                if point.message is not None:  # forked before the turn: ask it again
                    fork.agent.run(point.message, point.system, task_id=point.task_id)
    except MibyanError as exc:
        return ForkResult(job=job, fork_session_id=None, outcome=None,
                          error=f"{type(exc).__name__}: {exc}")
    return ForkResult(job=job, fork_session_id=fork.session_id,
                      outcome=_measured(home / "sessions", fork.session_id))


def run_fork_elsewhere(job: ForkJob, origin: bytes, key: bytes) -> ForkResult:
    """``run_fork`` in a scratch home (a Ray node): the recorded log comes in, the fork's log
    goes back, signed with the evaluation home's key so that it verifies there."""
    with tempfile.TemporaryDirectory(prefix="mibyan-eval-") as scratch:
        home = Path(scratch)
        root = home / "sessions"
        install_key(root, key)
        root.mkdir()
        session_path(root, job.point.session_id).write_bytes(origin)
        result = run_fork(job, home)
        if result.fork_session_id is None:
            return result
        path = session_path(root, result.fork_session_id)
        return attrs.evolve(result, logs=((path.name, path.read_bytes()),))
