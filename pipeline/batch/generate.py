"""Batch generation: one session per prompt, many at a time, then an export.

    from pipeline.batch.generate import BatchJob, run_batch
    report = run_batch(BatchJob(prompts=Path("prompts.jsonl"), out=Path("run1"), workers=4,
                                model="gpt-4o-mini"))

``prompts.jsonl`` holds one JSON object per line: ``{"prompt": ...}``, optionally ``task_id``
and ``system``. Each prompt runs in its own session under ``<out>/sessions`` with its own empty
working directory under ``<out>/work`` (:mod:`pipeline.batch.task` runs one), in a local process
pool (``backend="local"``) or on Ray (``backend="ray"``, ``pipeline.batch.on_ray``). The task
id is recorded in the session's turn, so a batch that crashed or was stopped resumes where it
was: a prompt whose turn completed in a log under ``<out>/sessions`` is skipped. At the end the
completed sessions of the batch are exported to ``<out>/trajectories.<fmt>.jsonl``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import attrs

from pipeline.batch.task import BatchJob, Task, TaskResult, digest, run_task
from pipeline.export.exporter import ExportReport, export_sessions
from pipeline.export.select import ExportFilters
from pipeline.export.token_formats import TokenExportReport
from stages.errors import UsageError

__all__ = ["BACKENDS", "BatchJob", "BatchReport", "finished_tasks", "read_prompts", "run_batch"]

BACKENDS = ("local", "ray")
Progress = Callable[[int, int], None]  # (done, total)


@attrs.frozen(kw_only=True)
class BatchReport:
    total: int
    skipped: int
    ran: int
    completed: int
    failed: tuple[str, ...]
    seconds: float
    export: ExportReport | TokenExportReport | None

    def describe(self) -> str:
        rate = self.ran / self.seconds * 60 if self.seconds > 0 else 0.0
        lines = [f"{self.total} prompts: {self.skipped} already done, {self.ran} ran "
                 f"({self.completed} completed) in {self.seconds:.1f} s "
                 f"({rate:.1f} sessions/min)"]
        if self.failed:
            lines.append(f"not completed: {', '.join(self.failed)}")
        if self.export is not None:
            lines.append(self.export.describe())
        return "\n".join(lines)


def _task_id(index: int, prompt: str) -> str:
    return f"task_{index:05d}_{digest(prompt)}"


def _optional(item: dict[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, kinds) or value == "":
        raise UsageError(f"{where}: {key} must be a non-empty "
                         f"{' or '.join(k.__name__ for k in kinds)}, got {value!r}")
    return value


def read_prompts(path: Path) -> list[Task]:
    """The tasks of a prompts file; a bad line is a :class:`UsageError` naming it."""
    try:
        # utf-8-sig: editors on Windows start the file with a byte order mark.
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read the prompts file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 (byte {exc.start})") from exc
    tasks: list[Task] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc})") from exc
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str) \
                or not item["prompt"].strip():
            raise UsageError(f'{path}:{number}: expected {{"prompt": "..."}} with a non-empty '
                             "prompt")
        where = f"{path}:{number}"
        task_id = _optional(item, "task_id", (str, int), where)
        system = _optional(item, "system", (str,), where)
        tasks.append(Task(task_id=_task_id(len(tasks), item["prompt"]) if task_id is None
                          else str(task_id), prompt=item["prompt"], system=system))
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise UsageError(f"{path}: task ids repeat ({', '.join(repeated)})")
    return tasks


_FINISHED = """
SELECT DISTINCT t.payload->>'task_id'
FROM events t JOIN events f ON f.session_id = t.session_id AND f.kind = 'turn_finished'
    AND f.seq > t.seq AND CAST(f.payload->>'completed' AS BOOLEAN)
WHERE t.kind = 'turn_started'
"""


def finished_tasks(root: Path) -> set[str]:
    """Task ids whose turn completed in a log under ``root`` (found with DuckDB)."""
    from pipeline.insights.query import query
    return {row[0] for row in query(root, _FINISHED)[1] if row[0]}


def _run_local(job: BatchJob, tasks: list[Task], progress: Progress) -> list[TaskResult]:
    import multiprocessing
    results: list[TaskResult] = []
    # forkserver: the parent may run threads (a progress bar, a server), which fork would copy
    # half-way.
    context = multiprocessing.get_context("forkserver")
    # Workers fork from a server that has already paid the one-off costs (pipeline.batch.warm).
    context.set_forkserver_preload(["pipeline.batch.warm"])
    with ProcessPoolExecutor(max_workers=job.workers, mp_context=context) as pool:
        futures = [pool.submit(run_task, job, task) for task in tasks]
        for future in as_completed(futures):
            results.append(future.result())
            progress(len(results), len(tasks))
    return results


def run_batch(job: BatchJob, *, progress: Progress | None = None,
              export: bool = True) -> BatchReport:
    """Run the prompts of ``job`` not already completed in ``job.out``, then export."""
    if job.backend not in BACKENDS:
        raise UsageError(f"unknown backend {job.backend!r}; choose from {', '.join(BACKENDS)}")
    if job.workers < 1:
        raise UsageError(f"workers must be at least 1, got {job.workers}")
    tasks = read_prompts(job.prompts)
    root = job.out / "sessions"
    done = finished_tasks(root) if root.is_dir() else set()
    todo = [task for task in tasks if task.task_id not in done]
    report = progress or (lambda n, total: None)
    started = time.monotonic()
    if job.backend == "ray":
        from pipeline.batch.on_ray import run_ray
        results = run_ray(job, todo, report)
    else:
        results = _run_local(job, todo, report) if todo else []
    seconds = time.monotonic() - started
    exported = _export(job, tasks) if export else None
    return BatchReport(total=len(tasks), skipped=len(tasks) - len(todo), ran=len(results),
                       completed=sum(r.completed for r in results),
                       failed=tuple(sorted(r.task_id for r in results if not r.completed)),
                       seconds=seconds, export=exported)


def _export(job: BatchJob, tasks: Iterable[Task]) -> ExportReport | TokenExportReport:
    """The completed sessions of this batch's prompts (others in ``out`` are left out)."""
    filters = ExportFilters(completed_only=True, task_ids=tuple(t.task_id for t in tasks))
    # OpenAI's lines carry only the keys it documents; the provenance (the task ids) goes
    # next to them.
    return export_sessions(job.out / "sessions", job.out / f"trajectories.{job.fmt}.jsonl",
                           fmt=job.fmt, filters=filters,
                           provenance="sidecar" if job.fmt == "openai" else None)
