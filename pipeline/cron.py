"""Scheduled agent runs: ``mibyan cron add "0 9 * * *" "prompt"``, and ``mibyan cron run``
(from the system's crontab or a timer, every minute or so) runs the jobs that are due.

Jobs live in ``<home>/cron/jobs.json``. A schedule is a five-field cron expression evaluated
in the machine's local time zone. A job is due when a fire time has passed since it last ran
(or since it was added); fire times missed while nothing ticked are run once, not once each.
A tick marks a job as run *before* running it, so a crash mid-run does not run it again and
again (at most once per fire time), and a lock keeps two overlapping ticks from running the
same jobs. The runs themselves (``pipeline.cli.cmd_cron``) use the cron platform hints and deny
dangerous commands.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from stages.errors import UsageError


@attrs.frozen(kw_only=True)
class Job:
    id: str
    schedule: str
    prompt: str
    created_at: str
    last_run: str | None = None
    last_session: str | None = None
    last_status: str | None = None
    # The endpoint the job was added with (else ``cron run``'s, the environment's or
    # config.toml's when it fires): a job must not fail because a variable is unset then.
    model: str | None = None
    provider: str | None = None
    base_url: str | None = None

    @property
    def endpoint(self) -> dict[str, str]:
        named = {"model": self.model, "provider": self.provider, "base_url": self.base_url}
        return {key: value for key, value in named.items() if value is not None}


def check_schedule(expression: str) -> str:
    """The expression, or a ``UsageError`` saying what is wrong with it."""
    from cronsim import CronSim, CronSimError
    try:
        # cronsim also takes six fields, the first being seconds: not what a crontab means.
        if len(expression.split()) != 5:
            raise CronSimError("Wrong number of fields")
        CronSim(expression, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    except CronSimError as exc:
        raise UsageError(f"not a cron schedule {expression!r}: {exc} (expected five fields: "
                         "minute hour day-of-month month day-of-week, e.g. '0 9 * * *')"
                         ) from exc
    return expression


def next_run(job: Job, now: dt.datetime) -> dt.datetime:
    """The job's next fire time after its last run (or its creation), in ``now``'s zone."""
    from cronsim import CronSim
    since = dt.datetime.fromisoformat(job.last_run or job.created_at).astimezone(now.tzinfo)
    return next(CronSim(job.schedule, since))


def is_due(job: Job, now: dt.datetime) -> bool:
    return next_run(job, now) <= now


class CronStore:
    """The jobs file, written whole and atomically."""

    def __init__(self, home: Path) -> None:
        self.dir = home / "cron"
        self.path = self.dir / "jobs.json"

    def jobs(self) -> list[Job]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the cron jobs in {self.path}: {exc}") from exc
        try:
            return [Job(**row) for row in data["jobs"]]
        except (KeyError, TypeError) as exc:
            raise UsageError(f"{self.path} is not a jobs file: {exc}") from exc

    def save(self, jobs: list[Job]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"jobs": [attrs.asdict(j) for j in jobs]}, indent=1),
                             encoding="utf-8")
        temporary.replace(self.path)

    def add(self, schedule: str, prompt: str, now: dt.datetime, **endpoint: str | None) -> Job:
        """``endpoint``: the job's own ``model``, ``provider`` and ``base_url`` (None: not set)."""
        if not prompt.strip():
            raise UsageError("a cron job needs a prompt")
        job = Job(id=uuid.uuid4().hex[:8], schedule=check_schedule(schedule), prompt=prompt,
                  created_at=now.isoformat(), **endpoint)
        with self.locked():
            self.save([*self.jobs(), job])
        return job

    def remove(self, job_id: str) -> Job:
        with self.locked():
            jobs = self.jobs()
            found = [j for j in jobs if j.id == job_id]
            if not found:
                raise UsageError(f"no cron job {job_id!r} (see mibyan cron list)")
            self.save([j for j in jobs if j.id != job_id])
        return found[0]

    def update(self, job: Job) -> None:
        """The job's new state (a job removed meanwhile stays removed)."""
        with self.locked():
            self.save([job if j.id == job.id else j for j in self.jobs()])

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The jobs file for this process alone (a read-modify-write at a time)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / "jobs.lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


# Runs one job: (job, the time it runs) -> (session id, status).
Runner = Callable[[Job, dt.datetime], tuple[str | None, str]]


def tick(store: CronStore, now: dt.datetime, run: Runner) -> list[Job]:
    """Run every job due at ``now``; the jobs as they are after their runs."""
    store.dir.mkdir(parents=True, exist_ok=True)
    with (store.dir / "tick.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []  # another tick is running these jobs
        return [run_job(store, job, now, run) for job in store.jobs() if _due(store, job, now)]


def unreadable() -> tuple[type[Exception], ...]:
    """What reading a hand-edited job's schedule or times can raise."""
    from cronsim import CronSimError
    return (CronSimError, ValueError, TypeError)


def _due(store: CronStore, job: Job, now: dt.datetime) -> bool:
    """Whether ``job`` is due; a job whose schedule or times cannot be read (a hand-edited
    jobs file) is not, and says why in its status, without keeping the others from running."""
    try:
        return is_due(job, now)
    except unreadable() as exc:
        status = f"error: cannot read this job: {type(exc).__name__}: {exc}"
        if job.last_status != status:
            store.update(attrs.evolve(job, last_status=status))
        return False


def run_job(store: CronStore, job: Job, now: dt.datetime, run: Runner) -> Job:
    """Run ``job`` now (marked run first); the job as it is after its run."""
    job = attrs.evolve(job, last_run=now.isoformat(), last_status="running")
    store.update(job)
    try:
        session, status = run(job, now)
    except Exception as exc:  # one job's failure must not stop the others
        session, status = None, f"error: {type(exc).__name__}: {exc}"
    job = attrs.evolve(job, last_session=session, last_status=status)
    store.update(job)
    return job
