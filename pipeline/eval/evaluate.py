"""Run an evaluation: select the recorded sessions, fork each at its points onto every
configuration, in parallel (threads, processes or Ray), score both sides and pair them.

The recorded sessions are copied into ``<out>/sessions`` (with their home's signing key) and
forked there, so ``<out>`` is a home: every fork is an ordinary session that replays, diffs and
exports, and a second evaluation never mistakes the forks of the first for recordings.
"""

from __future__ import annotations

import functools
import pickle
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from effects.eventlog.envelope import Envelope
from effects.eventlog.keys import SIGNING_FILE, install_key, keys_dir, signing_key_file
from effects.eventlog.store import read_envelopes, session_path
from pipeline.eval.outcome import Outcome, measure
from pipeline.eval.points import ForkPoint, fork_points
from pipeline.eval.report import EvalReport, Row, summarise
from pipeline.eval.scorers import Sample, make_scorer, score_all
from pipeline.eval.spec import EvalSpec
from pipeline.eval.work import ForkJob, ForkResult, run_fork, run_fork_elsewhere
from pipeline.export.select import select_lineages
from stages.errors import UsageError

__all__ = ["evaluate"]

Progress = Callable[[int, int], None]
_BASE = ("model", "provider", "base_url", "api_mode")


def _prepare(spec: EvalSpec) -> Path:
    """``<out>/sessions``, signing with the recorded home's key."""
    source, target = spec.home / "sessions", spec.out / "sessions"
    key = signing_key_file(source)
    existing = keys_dir(target) / SIGNING_FILE
    if existing.exists():
        if existing.read_bytes() != key:
            raise UsageError(f"{spec.out} holds an evaluation of another home; choose a new --out")
    else:
        target.mkdir(parents=True, exist_ok=True)
        install_key(target, key)
    return target


def _copy(source: Path, target: Path, session_id: str) -> None:
    data = session_path(source, session_id).read_bytes()
    path = session_path(target, session_id)
    if not path.exists():
        path.write_bytes(data)
    elif path.read_bytes() != data:
        raise UsageError(f"{path} differs from the recorded session; choose a new --out")


def _plan(spec: EvalSpec, logs: dict[str, list[Envelope]],
          tools: Sequence[Any]) -> list[ForkJob]:
    jobs: list[ForkJob] = []
    for config in spec.configs:
        mine: list[ForkJob] = []
        for session_id, log in logs.items():
            settings = log[0].payload.get("settings") or {}
            base = tuple((k, settings.get(k)) for k in _BASE if settings.get(k) is not None)
            split = next((e.seq for e in log if e.kind == "session_split"), None)
            for point in fork_points(session_id, log, spec.points):
                if split is None or point.at <= split:  # later points live in the child
                    mine.append(ForkJob(point=point, config=config, base=base,
                                        tools=tuple(tools)))
        jobs.extend(mine[:spec.limit])
    return jobs


def _check_tools(spec: EvalSpec, tools: Sequence[Any]) -> None:
    """Processes and Ray nodes get the tools by pickling; a tool that does not pickle (a
    ``@tool`` function is a wrapper, not its module's attribute) is named as ``module:name``."""
    if spec.backend == "threads":
        return
    try:
        pickle.dumps(tuple(tools))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise UsageError(f"the {spec.backend} backend sends the tools to other processes: "
                         f"name them as 'module:name' strings ({exc})") from exc


def _pool(spec: EvalSpec) -> Executor:
    if spec.backend == "threads":
        return ThreadPoolExecutor(max_workers=spec.workers)
    import multiprocessing
    # forkserver: the driver runs threads (the progress bar), which fork would copy half-way.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["pipeline.batch.warm"])
    return ProcessPoolExecutor(max_workers=spec.workers, mp_context=context)


def _run_here(spec: EvalSpec, jobs: list[ForkJob], progress: Progress) -> list[ForkResult]:
    results: list[ForkResult] = []
    with _pool(spec) as pool:
        futures = [pool.submit(run_fork, job, spec.out) for job in jobs]
        for future in as_completed(futures):
            results.append(future.result())
            progress(len(results), len(jobs))
    return results


def _run_ray(spec: EvalSpec, jobs: list[ForkJob], root: Path,
             progress: Progress) -> list[ForkResult]:
    from pipeline.batch.on_ray import write_back
    from pipeline.ray_cluster import join_ray, run_bounded
    ray = join_ray(spec.ray_address, spec.workers)
    remote = ray.remote(num_cpus=1)(run_fork_elsewhere)
    key = ray.put(signing_key_file(root))
    origins = {sid: ray.put(session_path(root, sid).read_bytes())
               for sid in {job.point.session_id for job in jobs}}
    results: list[ForkResult] = []

    def collect(_: int, result: ForkResult) -> None:
        write_back(root, result.logs)
        results.append(result)
        progress(len(results), len(jobs))

    run_bounded(ray, [functools.partial(remote.remote, job, origins[job.point.session_id], key)
                      for job in jobs], spec.workers, collect)
    return results


def _turn_prompt(log: list[Envelope], point: ForkPoint) -> str:
    started = [e for e in log if e.kind == "turn_started"][point.turn]
    return str(started.payload.get("user_message") or "")


def evaluate(spec: EvalSpec, *, tools: Sequence[Any] = (),
             progress: Progress | None = None) -> EvalReport:
    """Run ``spec``; the report is also written to ``<out>/eval.json`` and
    ``<out>/results.parquet`` (one row per fork, with the export extra's pyarrow)."""
    report_progress = progress or (lambda done, total: None)
    started = time.monotonic()
    scorers = {name: make_scorer(name, out=spec.out) for name in spec.scorers}
    source = spec.home / "sessions"
    if not source.is_dir():
        raise UsageError(f"no recorded sessions under {spec.home}")
    selection = select_lineages(source, spec.filters)
    root = _prepare(spec)
    logs = {sid: list(read_envelopes(session_path(source, sid))) for sid in selection.roots}
    _check_tools(spec, tools)
    jobs = _plan(spec, logs, tools)
    for session_id in {job.point.session_id for job in jobs}:
        _copy(source, root, session_id)
    if spec.backend == "ray":
        results = _run_ray(spec, jobs, root, report_progress)
    else:
        results = _run_here(spec, jobs, report_progress) if jobs else []
    rows = []
    for result in sorted(results, key=lambda r: (r.job.config.name, r.job.point.session_id,
                                                 r.job.point.at)):
        point, log = result.job.point, logs[result.job.point.session_id]
        recorded = measure((e.kind, e.payload) for e in log[point.at:])
        rows.append(_row(result, recorded, _turn_prompt(log, point), scorers))
    report = summarise(spec, rows, seconds=time.monotonic() - started, sessions=len(logs))
    report.write(spec.out)
    return report


def _row(result: ForkResult, recorded: Outcome, prompt: str,
         scorers: dict[str, Any]) -> Row:
    name = result.job.config.name
    fork_scores: dict[str, Any] = dict.fromkeys(scorers)
    if result.outcome is not None:
        fork_scores = score_all(scorers, Sample(prompt=prompt, answer=result.outcome.answer,
                                                recorded=recorded.answer, config=name))
    recorded_scores = score_all(scorers, Sample(prompt=prompt, answer=recorded.answer,
                                                recorded=recorded.answer, config="recorded"))
    return Row(config=name, session_id=result.job.point.session_id, at=result.job.point.at,
               point=result.job.point.point, fork_session_id=result.fork_session_id,
               error=result.error, fork=result.outcome, recorded=recorded,
               fork_scores=fork_scores, recorded_scores=recorded_scores)
