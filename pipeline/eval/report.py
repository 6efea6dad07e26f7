"""The evaluation's results: one row per fork, and per configuration the paired differences
fork - recorded of every measure and score with their bootstrap intervals. Written as JSON
(``eval.json``) and Parquet (``results.parquet``, one row per fork), shown as a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from pipeline.eval.outcome import METRICS, Outcome
from pipeline.eval.stats import Paired, paired

if TYPE_CHECKING:
    from pipeline.eval.spec import EvalSpec

__all__ = ["EvalReport", "Row", "summarise"]


@attrs.frozen(kw_only=True)
class Row:
    config: str
    session_id: str
    at: int
    point: str
    fork_session_id: str | None
    error: str | None
    fork: Outcome | None
    recorded: Outcome
    fork_scores: dict[str, float | None]
    recorded_scores: dict[str, float | None]

    def values(self, measure: str) -> tuple[float | None, float | None]:
        """(fork, recorded) of a measure or a score (``score:<name>``)."""
        if measure.startswith("score:"):
            name = measure.removeprefix("score:")
            return self.fork_scores.get(name), self.recorded_scores.get(name)
        return (None if self.fork is None else self.fork.value(measure),
                self.recorded.value(measure))

    def flat(self, measures: tuple[str, ...]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "config": self.config, "session_id": self.session_id, "at": self.at,
            "point": self.point, "fork_session_id": self.fork_session_id, "error": self.error,
            "fork_answer": None if self.fork is None else self.fork.answer,
            "recorded_answer": self.recorded.answer,
            "fork_model": None if self.fork is None else self.fork.model,
            "recorded_model": self.recorded.model}
        for measure in measures:
            fork, recorded = self.values(measure)
            row[f"fork_{measure}"], row[f"recorded_{measure}"] = fork, recorded
        return row


@attrs.frozen(kw_only=True)
class ConfigSummary:
    name: str
    forks: int
    failed: int
    paired: dict[str, Paired]


@attrs.frozen(kw_only=True)
class EvalReport:
    configs: tuple[ConfigSummary, ...]
    rows: tuple[Row, ...]
    measures: tuple[str, ...]
    sessions: int
    seconds: float
    level: float = 0.95

    @property
    def forks_per_second(self) -> float:
        return len(self.rows) / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "forks": len(self.rows), "seconds": self.seconds,
                "forks_per_second": self.forks_per_second, "level": self.level,
                "configs": [{"name": c.name, "forks": c.forks, "failed": c.failed,
                             "paired": {m: attrs.asdict(p) for m, p in c.paired.items()}}
                            for c in self.configs],
                "rows": [r.flat(self.measures) for r in self.rows]}

    def write(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "eval.json").write_text(json.dumps(self.to_json(), indent=1) + "\n")
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:  # Parquet needs the export extra; JSON is always written
            return
        pq.write_table(pa.Table.from_pylist([r.flat(self.measures) for r in self.rows]),
                       out / "results.parquet")

    def lines(self) -> list[str]:
        """The table as plain text: per configuration and measure, the recorded and fork
        means, the paired difference and its interval (``*``: zero lies outside it)."""
        head = f"{'config':<14} {'measure':<22} {'n':>5} {'recorded':>10} {'fork':>10} " \
               f"{'diff':>10}  {int(self.level * 100)}% interval"
        out = [head]
        for config in self.configs:
            out.append(f"{config.name}: {config.forks} forks, {config.failed} failed")
            for measure, p in config.paired.items():
                out.append(f"{'':<14} {measure:<22} {p.n:>5} {_num(p.recorded_mean):>10} "
                           f"{_num(p.fork_mean):>10} {_num(p.diff):>10}  "
                           f"[{_num(p.low)}, {_num(p.high)}]{' *' if p.real else ''}")
        out.append(f"{self.sessions} sessions, {len(self.rows)} forks in {self.seconds:.1f} s "
                   f"({self.forks_per_second:.1f} forks/s)")
        return out


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def summarise(spec: EvalSpec, rows: list[Row], *, seconds: float, sessions: int) -> EvalReport:
    measures = METRICS + tuple(f"score:{s}" for s in spec.scorers)
    configs = []
    for config in spec.configs:
        mine = [r for r in rows if r.config == config.name]
        stats = {}
        for measure in measures:
            fork, recorded = zip(*(r.values(measure) for r in mine), strict=True) if mine \
                else ((), ())
            stats[measure] = paired(fork, recorded, resamples=spec.resamples, seed=spec.seed)
        configs.append(ConfigSummary(name=config.name, forks=len(mine),
                                     failed=sum(r.error is not None for r in mine),
                                     paired=stats))
    return EvalReport(configs=tuple(configs), rows=tuple(rows), measures=measures,
                      sessions=sessions, seconds=seconds)
