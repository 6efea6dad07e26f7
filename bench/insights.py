"""The insights index at a million events. Not part of the test suite; it asserts nothing about
speed and prints one report.

    python bench/insights.py                  # about 1,000,000 events
    python bench/insights.py --events 100000  # a smaller run
    python bench/insights.py --keep DIR       # keep the generated home in DIR

The logs are synthesised quickly: the sample home of the tests (``tests/sample_home.py``: real
sessions through the agent against the fake OpenAI server) is recorded once, then its sessions
are copied again and again under new session ids, models and days, each record re-encoded with
``encode_line`` so every copy has a valid hash chain (a copy's lineage points at its own copies).
Then: the index built from nothing, an update with nothing new, an update after appending a
turn's records to 1% of the logs, and the time of ``summarise`` and of one query per view.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from effects.eventlog.envelope import encode_line, line_hash  # noqa: E402
from effects.eventlog.store import read_envelopes, session_path  # noqa: E402
from pipeline.insights.figures import summarise  # noqa: E402
from pipeline.insights.index import open_index  # noqa: E402
from pipeline.insights.views import UNITS  # noqa: E402
from tests.sample_home import record  # noqa: E402

MODELS = ("gpt-4o-mini", "claude-sonnet-4-5", "gpt-4.1", "local-model")
_KEYS = {"session_id", "parent_session_id", "child_session_id"}


def _rename(value: object, ids: dict[str, str]) -> object:
    if isinstance(value, dict):
        return {k: (ids.get(v, v) if k in _KEYS and isinstance(v, str) else _rename(v, ids))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, ids) for v in value]
    return value


def _shift(stamp: str, delta: dt.timedelta) -> str:
    return (dt.datetime.fromisoformat(stamp) + delta).isoformat(timespec="microseconds")


def _write_copy(root: Path, template: dict[str, list], copy: int) -> int:
    """One copy of the template sessions; returns the records written."""
    ids = {sid: f"b{copy:06d}_{sid}" for sid in template}
    delta = dt.timedelta(days=copy % 30, hours=(copy * 7) % 24, seconds=copy)
    model = MODELS[copy % len(MODELS)]
    written = 0
    for sid, envelopes in template.items():
        lines, prev = [], "0" * 64
        for env in envelopes:
            payload = _rename(env.payload, ids)
            if env.kind == "model_replied" or env.kind == "context_summarised":
                payload = {**payload, "model": model}
            line = encode_line(ids[sid], env.seq, env.kind, env.schema_version,
                               _shift(env.recorded_at, delta), prev, payload)
            lines.append(line)
            prev = line_hash(line)
        session_path(root, ids[sid]).write_bytes(b"\n".join(lines) + b"\n")
        written += len(lines)
    return written


def synthesise(root: Path, events: int) -> tuple[int, int]:
    """Copies of the sample home's sessions under ``root`` until ``events`` records exist."""
    with tempfile.TemporaryDirectory() as tmp:
        sample = record(Path(tmp) / "home")
        template = {p.stem: list(read_envelopes(p))
                    for p in sorted(sample.root.glob("*.jsonl"))}
    root.mkdir(parents=True, exist_ok=True)
    total, copy = 0, 0
    while total < events:
        total += _write_copy(root, template, copy)
        copy += 1
    return total, len(list(root.glob("*.jsonl")))


def _append_turn(root: Path, share: float) -> int:
    """Append a copy of each chosen log's last turn (its records re-chained) to 1 in 100."""
    appended = 0
    paths = sorted(root.glob("*.jsonl"))
    for path in paths[:: int(1 / share)]:
        envelopes = list(read_envelopes(path))
        starts = [i for i, e in enumerate(envelopes) if e.kind == "turn_started"]
        if not starts:
            continue
        tail = [e for e in envelopes[starts[-1]:] if e.kind != "session_split"]
        seq, prev = envelopes[-1].seq + 1, line_hash(path.read_bytes().splitlines()[-1])
        lines = []
        for env in tail:
            line = encode_line(env.session_id, seq, env.kind, env.schema_version,
                               env.recorded_at, prev, env.payload)
            lines.append(line)
            seq, prev = seq + 1, line_hash(line)
        with open(path, "ab") as fh:
            fh.write(b"\n".join(lines) + b"\n")
        appended += len(lines)
    return appended


def _timed(fn, repeats: int = 5) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def _query_times(root: Path, index: Path) -> dict[str, float]:
    out = {}
    with open_index(root, path=index) as (con, _):
        for unit in UNITS:
            out[f"SELECT count(*), any_value(session_id) FROM {unit}"] = _timed(
                lambda u=unit: con.execute(
                    f"SELECT count(*), any_value(session_id) FROM {u}").fetchall())[0]
        sql = ("SELECT model, sum(input_tokens), sum(output_tokens), "
               "quantile_cont(latency_ms, 0.95) FROM model_calls GROUP BY model")
        out[sql] = _timed(lambda: con.execute(sql).fetchall())[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="generate the home here and keep it")
    args = parser.parse_args()
    home = args.keep or Path(tempfile.mkdtemp(prefix="mibyan-insights-bench-"))
    root, index = home / "sessions", home / "insights.duckdb"
    try:
        began = time.perf_counter()
        events, logs = synthesise(root, args.events)
        size = sum(p.stat().st_size for p in root.glob("*.jsonl"))
        print(f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, python "
              f"{sys.version.split()[0]}")
        print(f"synthesised {events:,} events in {logs:,} logs ({size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - began:.1f} s")
        build, report = _timed(lambda: _build(root, index), repeats=1)
        print(f"index built from nothing: {build:.2f} s ({report.records_added:,} records, "
              f"{index.stat().st_size / 1e6:.0f} MB)")
        noop, _ = _timed(lambda: _update(root, index), repeats=3)
        print(f"update, nothing new: {noop:.3f} s")
        appended = _append_turn(root, 0.01)
        incremental, report = _timed(lambda: _update(root, index), repeats=1)
        print(f"update after appending {appended:,} records to {len(report.appended):,} logs: "
              f"{incremental:.3f} s ({report.records_added:,} records added)")
        summary, insights = _timed(lambda: summarise(root, index=index), repeats=3)
        print(f"summarise() (update check + every figure of `mibyan insights`): {summary:.3f} s "
              f"over {events + appended:,} events, {insights.turns['turns']:,} turns")
        for sql, seconds in _query_times(root, index).items():
            print(f"  {seconds * 1000:7.1f} ms  {sql}")
        print(json.dumps({"tokens": insights.tokens, "cost_usd": insights.cost_usd}))
    finally:
        if args.keep is None:
            shutil.rmtree(home, ignore_errors=True)


def _build(root: Path, index: Path):
    with open_index(root, path=index, rebuild=True) as (_, report):
        return report


def _update(root: Path, index: Path):
    with open_index(root, path=index) as (_, report):
        return report


if __name__ == "__main__":
    main()
