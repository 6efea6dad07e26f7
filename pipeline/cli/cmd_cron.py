"""``mibyan cron add | list | remove | run``: the command's body (the schedule is
``pipeline.cron``). A run is an agent session on the cron platform (its hints tell the model
nobody is watching) whose dangerous commands are denied: no one can approve them, and the
"always" allow-list of interactive sessions does not apply either."""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path
from typing import Any

import attrs

from pipeline import config as cfg
from pipeline.cron import CronStore, Job, Runner, next_run, run_job, tick, unreadable
from pipeline.shell.approval import Approver
from pipeline.toolsets import DEFAULT_TOOLSETS

EXIT_OK, EXIT_FAILED = 0, 1


def job_runner(home: Path, *, workdir: Path, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS,
               **config: Any) -> Runner:
    """Runs a job as a fresh session; ``config`` are ``configure``'s keywords. The answer is
    kept in ``<home>/cron/output/<job>/<time>.md``."""
    from pipeline.serve.agents import session_agent
    from pipeline.settings import configure

    def run(job: Job, now: dt.datetime) -> tuple[str | None, str]:
        parts = configure(home=home, platform="cron", cwd=workdir,
                          **{**config, **job.endpoint})
        parts = attrs.evolve(parts, effects=attrs.evolve(parts.effects, approver=Approver()))
        with session_agent(parts, session_id=None, platform="cron", workdir=workdir,
                           toolsets=toolsets) as agent:
            result = agent.run(job.prompt)
        output = home / "cron" / "output" / job.id
        output.mkdir(parents=True, exist_ok=True)
        stamp = now.strftime("%Y%m%dT%H%M%S")
        # Private as the logs and exports are: an answer may quote what the tools read.
        answer = os.open(output / f"{stamp}.md", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(answer, "w", encoding="utf-8") as sink:
            sink.write(result.final_response or "")
        status = "ok" if result.completed else (
            f"failed: {result.error}" if result.failed else result.turn_exit_reason)
        return result.session_id, status
    return run


def _now() -> dt.datetime:
    return dt.datetime.now().astimezone()


def _list(store: CronStore) -> int:
    now = _now()
    jobs = store.jobs()
    for job in jobs:
        prompt = job.prompt if len(job.prompt) <= 48 else job.prompt[:47] + "…"
        try:
            when = f"{next_run(job, now):%Y-%m-%d %H:%M}"
        except unreadable():
            when = "(unreadable)"
        print(f"{job.id}  {job.schedule:<15}  next {when}  last {job.last_status or '-'}  "
              f"{prompt}")
    print(f"({len(jobs)} job{'s' if len(jobs) != 1 else ''})")
    return EXIT_OK


def _run(store: CronStore, args: argparse.Namespace, home: Path) -> int:
    runner = job_runner(home, workdir=Path(args.workdir or Path.cwd()),
                        toolsets=args.toolsets or DEFAULT_TOOLSETS,
                        model=args.model, base_url=args.base_url, provider=args.provider)
    now = _now()
    if args.job:
        job = next((j for j in store.jobs() if j.id == args.job), None)
        if job is None:
            from stages.errors import UsageError
            raise UsageError(f"no cron job {args.job!r} (see mibyan cron list)")
        done = [run_job(store, job, now, runner)]
    else:
        done = tick(store, now, runner)
    for job in done:
        print(f"{job.id}: {job.last_status} (session {job.last_session})")
    return EXIT_OK if all(j.last_status == "ok" for j in done) else EXIT_FAILED


def cron(args: argparse.Namespace) -> int:
    home = args.home or cfg.home()
    store = CronStore(home)
    if args.cron_command == "add":
        job = store.add(args.schedule, args.prompt, _now(), model=args.model,
                        provider=args.provider, base_url=args.base_url)
        print(f"added {job.id}: next run {next_run(job, _now()):%Y-%m-%d %H:%M %Z}")
        return EXIT_OK
    if args.cron_command == "remove":
        print(f"removed {store.remove(args.job).id}")
        return EXIT_OK
    if args.cron_command == "list":
        return _list(store)
    return _run(store, args, home)
