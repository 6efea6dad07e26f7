"""``mibyan export`` and ``mibyan batch``: the command bodies (the parser is in cli.py)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

from pipeline import config as cfg
from stages.errors import UsageError

EXIT_OK, EXIT_FAILED = 0, 1


def _date(text: str | None, flag: str) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(f"{flag} must be a date like 2026-01-31, got {text!r}") from exc


def _filters(args: argparse.Namespace) -> Any:
    from pipeline.export.select import ExportFilters
    return ExportFilters(
        completed_only=args.completed, model=args.model, since=_date(args.since, "--since"),
        until=_date(args.until, "--until"), no_fallback=args.no_fallback,
        no_compression=args.no_compression, min_turns=args.min_turns,
        max_turns=args.max_turns, tool=args.tool, task_id=args.task_id,
        session_ids=tuple(args.session or ()))


def export(args: argparse.Namespace) -> int:
    from pipeline.export.exporter import export_sessions
    from pipeline.ray_cluster import on_ray
    filters = _filters(args)
    root = (args.home or cfg.home()) / "sessions"
    report = export_sessions(root, Path(args.out), fmt=args.format, filters=filters,
                             lineage=args.lineage, output=args.output,
                             provenance=args.provenance, trainable_only=not args.all_samples,
                             jobs=args.jobs, ray=on_ray(args))
    print(report.describe())
    return EXIT_OK


def batch(args: argparse.Namespace) -> int:
    from pipeline.batch.generate import BatchJob, run_batch
    job = BatchJob(prompts=Path(args.prompts), out=Path(args.out), workers=args.workers,
                   backend=args.backend, model=args.model, base_url=args.base_url,
                   provider=args.provider, api_mode=args.api_mode, max_turns=args.max_turns,
                   toolsets=None if args.no_tools else args.toolsets, fmt=args.format,
                   ray_address=args.ray_address, record_tokens=bool(args.record_tokens),
                   tokenizer=args.tokenizer)
    with _Progress(enabled=not args.quiet and sys.stderr.isatty()) as progress:
        report = run_batch(job, progress=progress)
    print(report.describe())
    return EXIT_OK if not report.failed else EXIT_FAILED


def evaluate(args: argparse.Namespace) -> int:
    from pipeline.cli.cmd_replay import parse_sets
    from pipeline.eval import Configuration, EvalSpec, evaluate, load_configurations
    configs = list(load_configurations(args.configs)) if args.configs else []
    shared = {k: v for k, v in (("base_url", args.base_url), ("provider", args.provider))
              if v is not None}
    for model in args.onto or ():
        configs.append(Configuration.of(model, model=model, **shared, **parse_sets(args.set)))
    if not configs:
        raise UsageError("eval needs configurations: --configs FILE or --onto MODEL")
    spec = EvalSpec(home=args.home or cfg.home(), out=Path(args.out), configs=tuple(configs),
                    points=tuple(args.point or ("last-turn",)), filters=_filters(args),
                    scorers=tuple(args.scorer or ("exact",)), workers=args.workers,
                    backend=args.backend, ray_address=args.ray_address, limit=args.limit)
    with _Progress(enabled=not args.quiet and sys.stderr.isatty(), label="forks") as progress:
        report = evaluate(spec, progress=progress)
    _table(report)
    print(f"wrote {Path(args.out) / 'eval.json'} and results.parquet; the forks replay with "
          f"MIBYAN_HOME={args.out} mibyan replay --all")
    return EXIT_OK


def _table(report: Any) -> None:
    """The paired table: with rich on a terminal, else plain lines."""
    if not sys.stdout.isatty():
        print("\n".join(report.lines()))
        return
    from rich.console import Console
    from rich.table import Table
    table = Table("config", "measure", "n", "recorded", "fork", "diff", "95% interval")
    for config in report.configs:
        for measure, p in config.paired.items():
            low_high = "-" if p.low is None else f"[{p.low:.4g}, {p.high:.4g}]"
            table.add_row(config.name, measure, str(p.n), _g(p.recorded_mean), _g(p.fork_mean),
                          _g(p.diff), low_high + (" *" if p.real else ""))
    Console().print(table)
    print(report.lines()[-1])


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


class _Progress:
    """A rich progress bar on stderr (imported only when shown)."""

    def __init__(self, *, enabled: bool, label: str = "sessions") -> None:
        self.enabled = enabled
        self.label = label
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
        self.bar = Progress("[progress.description]{task.description}", BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True))
        self.bar.__enter__()
        self.task = self.bar.add_task(self.label, total=None)
        return self.update

    def update(self, done: int, total: int) -> None:
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc_info: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc_info)
