"""Evaluation throughput: ``pipeline.eval.evaluate`` over a few hundred recorded sessions
(made here against the in-tree fake OpenAI server) against two configurations (two more fake
servers), on local processes, threads and a local Ray. Not part of the test suite; it asserts
nothing about speed and prints one line per backend, then checks that every fork replays.

    python bench/eval.py                    # 300 sessions, 2 configurations, 2 workers
    python bench/eval.py --sessions 100 --no-ray

Each recorded session is one turn: a tool call (a failing one for every third question), then
the answer; each fork re-asks the turn's message and gets one answer. The time is the whole
evaluation: selection through DuckDB, copying, forking, scoring, the bootstrap, the writes.
On Ray the local Ray is started and its workers warmed before the clock (the start, printed,
is paid once per cluster). Memory is the peak resident set of the driver and, separately, of
its largest child (and, on Ray, of each Ray worker: the raylet's children,
``bench/ray_workers.py``).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
# The local Ray's workers inherit the environment: they import the tools and probes from here.
os.environ["PYTHONPATH"] = os.pathsep.join((str(ROOT), str(ROOT / "bench")))

from ray_workers import worker_peaks_mb  # noqa: E402 - bench/ray_workers.py

from pipeline.eval import Configuration, EvalSpec, evaluate  # noqa: E402
from pipeline.shell.replay import replay  # noqa: E402
from tests.fake_openai import FakeOpenAIServer, Reply  # noqa: E402
from tests.pipeline.eval_sessions import record_sessions  # noqa: E402


def _mb(kilobytes: int) -> float:
    return kilobytes / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--backends", type=lambda t: t.split(","),
                        help="the backends to run (default local,threads,ray)")
    args = parser.parse_args()
    backends = args.backends or ["local", "threads"] + ([] if args.no_ray else ["ray"])
    with tempfile.TemporaryDirectory() as scratch, \
            FakeOpenAIServer(default=Reply.text("answer 1")) as same, \
            FakeOpenAIServer(default=Reply.text("another answer")) as other:
        home = Path(scratch) / "home"
        started = time.monotonic()
        record_sessions(home, args.sessions)
        print(f"recorded {args.sessions} sessions in {time.monotonic() - started:.1f} s")
        configs = (Configuration.of("same", base_url=same.base_url),
                   Configuration.of("other", base_url=other.base_url, model="gpt-4o"))
        for backend in backends:
            if backend == "ray":
                # Ray's start (a minute on a loaded machine) is paid once, not by each
                # evaluation: started, and its workers warmed, before the clock.
                from ray_workers import warm

                from pipeline.ray_cluster import join_ray
                started = time.monotonic()
                warm(join_ray(None, args.workers), args.workers)
                print(f"local Ray started and warmed in {time.monotonic() - started:.1f} s")
            out = Path(scratch) / f"out-{backend}"
            report = evaluate(EvalSpec(home=home, out=out, configs=configs, workers=args.workers,
                                       backend=backend, scorers=("exact", "contains:answer")),
                              tools=["tests.pipeline.eval_sessions:lookup"])
            failed = sum(c.failed for c in report.configs)
            ray_workers = ""
            if backend == "ray":
                import ray
                peaks = worker_peaks_mb(ray, args.workers)
                ray_workers = f", Ray workers {'/'.join(f'{p:.0f}' for p in peaks)} MB"
            print(f"{backend:>8}: {report.sessions} sessions, {len(report.rows)} forks "
                  f"({failed} failed) in {report.seconds:.1f} s: "
                  f"{report.sessions / report.seconds:.1f} sessions/s, "
                  f"{report.forks_per_second:.1f} forks/s; peak RSS driver "
                  f"{_mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss):.0f} MB, "
                  f"largest child "
                  f"{_mb(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss):.0f} MB"
                  f"{ray_workers}")
            started = time.monotonic()
            held = sum(replay(out / "sessions", r.fork_session_id).identical
                       for r in report.rows if r.fork_session_id)
            print(f"          {held}/{len(report.rows)} forks replay identically "
                  f"({time.monotonic() - started:.1f} s)")
        print("\n".join(report.lines()))


if __name__ == "__main__":
    main()
