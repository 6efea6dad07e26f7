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


def export(args: argparse.Namespace) -> int:
    from pipeline.export.exporter import export_sessions
    from pipeline.export.select import ExportFilters
    filters = ExportFilters(
        completed_only=args.completed, model=args.model, since=_date(args.since, "--since"),
        until=_date(args.until, "--until"), no_fallback=args.no_fallback,
        no_compression=args.no_compression, min_turns=args.min_turns,
        max_turns=args.max_turns, tool=args.tool, task_id=args.task_id,
        session_ids=tuple(args.session or ()))
    root = (args.home or cfg.home()) / "sessions"
    report = export_sessions(root, Path(args.out), fmt=args.format, filters=filters,
                             lineage=args.lineage, output=args.output)
    print(report.describe())
    return EXIT_OK


def batch(args: argparse.Namespace) -> int:
    from pipeline.batch.generate import BatchJob, run_batch
    job = BatchJob(prompts=Path(args.prompts), out=Path(args.out), workers=args.workers,
                   backend=args.backend, model=args.model, base_url=args.base_url,
                   provider=args.provider, api_mode=args.api_mode, max_turns=args.max_turns,
                   toolsets=None if args.no_tools else args.toolsets, fmt=args.format,
                   ray_address=args.ray_address, record_tokens=bool(args.record_tokens))
    with _Progress(enabled=not args.quiet and sys.stderr.isatty()) as progress:
        report = run_batch(job, progress=progress)
    print(report.describe())
    return EXIT_OK if not report.failed else EXIT_FAILED


class _Progress:
    """A rich progress bar on stderr (imported only when shown)."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
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
        self.task = self.bar.add_task("sessions", total=None)
        return self.update

    def update(self, done: int, total: int) -> None:
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc_info: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc_info)
