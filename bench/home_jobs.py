"""Whole-home work on every core: ``mibyan replay --all``, ``mibyan export`` and the insights
index, on 1 and 2 (or more) processes or Ray workers, in alternating rounds. Not part of the
test suite; it asserts nothing about speed and prints one report.

    python bench/home_jobs.py                         # about 200,000 events, jobs 1 and 2
    python bench/home_jobs.py --events 50000 --rounds 2 --jobs 1,2,4
    python bench/home_jobs.py --backend ray --jobs 1,2,4 --work replay,export
    python bench/home_jobs.py --work export --labelled   # a key that one log's label names
    python bench/home_jobs.py --events 1000000 --work index --home /tmp/h1m --memory-limit 256MB

The home is synthesised as ``bench/insights.py`` does it (the test sample home's sessions
copied under new ids, each copy a valid hash chain). Each measurement runs in a fresh process
(the pool's workers are its children): events per second over its wall time, its own peak RSS
and the largest peak RSS of its workers (``RUSAGE_CHILDREN``). Replay is
``pipeline.cli.cmd_replay.replay_every``; the index is rebuilt from nothing with
``open_index(rebuild=True, jobs=N)``; the export is ``export_sessions`` to ShareGPT JSONL
(the home's index, which the export selects over, is built once before the clock). With
``--labelled`` the home has one more session whose turns name a credential label, and that
label's key is in every measurement's environment: the export must redact a key only one log
names (until issue 29 it then shaped the whole home twice). Each run also reports its CPU time
(its own and its waited-for children's, the pool's workers). ``--home`` keeps the home made (a
home there already is measured as it is); ``--memory-limit`` is DuckDB's while the index is
rebuilt.

With ``--backend ray`` a local Ray of as many CPUs as the largest ``--jobs`` is started here and
every measurement's process joins it by address, with ``ray=OnRay(address)`` and ``jobs=N``
workers; the job's workers are started and warmed (imports) before the clock starts, and their
peak RSS is read by a probe task on each (``bench/ray_workers.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))


def worker(what: str, home: Path, jobs: int, events: int, address: str,
           memory_limit: str) -> dict:
    import duckdb  # noqa: F401 - imported before the clock starts, as replay's modules are

    from pipeline.cli.cmd_replay import replay_every
    from pipeline.export.exporter import export_sessions
    from pipeline.insights.index import open_index
    from pipeline.ray_cluster import OnRay, join_ray
    root = home / "sessions"
    on_ray = OnRay(address) if address else None
    if on_ray is not None:
        from ray_workers import warm  # bench/ray_workers.py
        warm(join_ray(address, jobs), jobs)
    started, cpu = time.perf_counter(), _cpu_seconds()
    if what == "replay":
        result = replay_every(root, jobs=jobs, ray=on_ray)
        assert result.held, result.failures[:1]
        events = result.events
    elif what == "export":
        out = home / f"export-{os.getpid()}.jsonl"
        export_sessions(root, out, jobs=jobs, ray=on_ray)
        out.unlink()
    else:
        index = home / f"index-{os.getpid()}.duckdb"
        with open_index(root, path=index, rebuild=True, jobs=jobs, ray=on_ray,
                        memory_limit=memory_limit) as (_, report):
            events = report.records_added
        index.unlink()
    seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if on_ray is not None:
        from ray_workers import worker_peaks_mb
        workers = max(worker_peaks_mb(join_ray(address, jobs), jobs))
    return {"events": events, "seconds": seconds, "cpu_seconds": cpu, "rss_mb": _own_peak_mb(),
            "worker_rss_mb": workers}


def _cpu_seconds() -> float:
    return sum(t for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for t in resource.getrusage(who)[:2])


# The credential label of ``--labelled``'s session, and the key the export finds for it.
LABEL, LABEL_KEY = "BENCH_TEAM_KEY", "bench-team-key-0123456789abcdef"


def record_labelled(home: Path) -> None:
    """One session whose turn names ``LABEL`` (served by the tests' fake OpenAI server)."""
    from pipeline.agent import Agent
    from tests.fake_openai import FakeOpenAIServer, Reply
    os.environ[LABEL] = "sk-recorded-key-aaaaaaaaaaaa"  # the key the session ran with
    try:
        with FakeOpenAIServer(Reply.text("noted")) as server, \
                Agent(base_url=server.base_url, home=home, model="m", stream=False,
                      credentials=[LABEL]) as agent:
            agent.run("hello")
    finally:
        del os.environ[LABEL]


def _own_peak_mb() -> float:
    """This process's peak RSS since it started this program: ``VmHWM``, not ``ru_maxrss``,
    which Linux carries over an ``exec`` from the forked parent (the bench, holding the
    synthesised home), so that every driver looked at least as big as the bench."""
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def measure(what: str, home: Path, jobs: int, events: int, address: str,
            memory_limit: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", what, str(home), str(jobs),
                          str(events), address, memory_limit], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=lambda t: [int(n) for n in t.split(",")], default=[1, 2])
    parser.add_argument("--work", type=lambda t: t.split(","),
                        default=["replay", "export", "index"])
    parser.add_argument("--backend", choices=("processes", "ray"), default="processes")
    parser.add_argument("--labelled", action="store_true",
                        help="one more session naming a credential label whose key is set")
    parser.add_argument("--home", type=Path, help="a home to keep: synthesised there if it has "
                        "no sessions yet, reused as it is if it has (a 1M home takes minutes)")
    parser.add_argument("--memory-limit", default="1GB",
                        help="DuckDB's while the index is rebuilt (open_index's memory_limit)")
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        what, home, jobs, events, address, memory_limit = args.worker
        print(json.dumps(worker(what, Path(home), int(jobs), int(events), address,
                                memory_limit)))
        return
    address = ""
    if args.backend == "ray":
        # The measurements' processes join this Ray; its workers import mibyan from here.
        os.environ.update(PYTHONPATH=os.pathsep.join((str(ROOT), str(ROOT / "bench"))),
                          RAY_USAGE_STATS_ENABLED="0")
        from pipeline.ray_cluster import join_ray
        address = join_ray(None, max(args.jobs)).get_runtime_context().gcs_address
    from insights import synthesise  # bench/insights.py
    home = args.home or Path(tempfile.mkdtemp(prefix="mibyan-home-jobs-"))
    try:
        if args.home is not None and any((home / "sessions").glob("*.jsonl")):
            events = _counted(home / "sessions")
        else:
            events, _ = synthesise(home / "sessions", args.events)
            if args.labelled:
                record_labelled(home)
        if args.labelled:
            os.environ[LABEL] = LABEL_KEY  # inherited by every measurement's process
        logs = len(list((home / "sessions").glob("*.jsonl")))
        if "export" in args.work:  # the export selects over the index: built once, not timed
            from pipeline.insights.index import open_index
            with open_index(home / "sessions"):
                pass
        size = sum(p.stat().st_size for p in (home / "sessions").glob("*.jsonl"))
        print(f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.2f}; {events:,} events in "
              f"{logs:,} logs ({size / 1e6:.0f} MB); {args.rounds} rounds, jobs in turn, "
              f"on {args.backend}")
        runs: dict[tuple[str, int], list[dict]] = {}
        for _ in range(args.rounds):
            for what in args.work:
                for jobs in args.jobs:
                    done = measure(what, home, jobs, events, address, args.memory_limit)
                    runs.setdefault((what, jobs), []).append(done)
                    print(f"  {what} jobs {jobs}: {done['events'] / done['seconds']:,.0f} "
                          f"events/s, CPU {done['cpu_seconds']:.1f} s, "
                          f"worker peak {done['worker_rss_mb']:.0f} MB", flush=True)
        print("\n| work | jobs | events/s median (min-max) | x 1 job, per round | "
              "CPU s median | peak RSS MB, driver | peak RSS MB, largest worker |")
        print("|---|---|---|---|---|---|---|")
        for (what, jobs), done in runs.items():
            rates = [r["events"] / r["seconds"] for r in done]
            single = [r["events"] / r["seconds"] for r in runs[(what, args.jobs[0])]]
            ratios = [a / b for a, b in zip(rates, single, strict=True)]
            workers = max(r["worker_rss_mb"] for r in done)
            print(f"| {what} | {jobs} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-"
                  f"{max(rates):,.0f}) | {statistics.median(ratios):.2f} ({min(ratios):.2f}-"
                  f"{max(ratios):.2f}) | "
                  f"{statistics.median(r['cpu_seconds'] for r in done):.1f} | "
                  f"{max(r['rss_mb'] for r in done):.0f} | "
                  f"{workers:.0f} |")
        print(f"\nload at the end {os.getloadavg()[0]:.2f}")
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)


def _counted(root: Path) -> int:
    """The records of a kept home (one per line)."""
    total = 0
    for path in root.glob("*.jsonl"):
        with open(path, "rb") as fh:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return total


if __name__ == "__main__":
    main()
