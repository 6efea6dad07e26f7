"""Batch throughput: sessions per minute of ``mibyan batch`` against the in-tree fake OpenAI
server, for 1, 2 and 4 workers, on the local process pool and on a local Ray. Not part of the
test suite; it asserts nothing about speed and prints one table.

    python bench/batch.py                  # 24 prompts per run
    python bench/batch.py --prompts 48     # more prompts
    python bench/batch.py --no-ray         # the local pool only

Each session is one turn with one model call (a short text answer, no server latency), so the
figure is mibyan's own cost per session: starting an Agent, writing and syncing its log, the
worker round trip. The time is the batch's run (the export after it is not counted), including
the start of the pool's worker processes. Warm-up batches start the fork server (whose workers
fork with mibyan already imported) and Ray (once, 4 CPUs) before the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.batch.generate import BatchJob, run_batch  # noqa: E402
from tests.fake_openai import FakeOpenAIServer, Reply  # noqa: E402

WORKERS = (1, 2, 4)


def _prompts(directory: Path, n: int) -> Path:
    path = directory / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(n)))
    return path


def measure(backend: str, workers: int, n: int, base_url: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        job = BatchJob(prompts=_prompts(Path(tmp), n), out=Path(tmp) / "run", workers=workers,
                       backend=backend, model="gpt-fake", base_url=base_url)
        report = run_batch(job, export=False)
    assert report.completed == n, report.describe()
    return report.ran / report.seconds * 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    backends = ("local",) if args.no_ray else ("local", "ray")
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()}, {args.prompts} prompts/run")
    rows = []
    with FakeOpenAIServer(Reply.text("an answer")) as server:
        measure("local", 1, 1, server.base_url)  # warm-up: start the fork server
        if "ray" in backends:
            from pipeline.ray_cluster import start_local_ray
            start_local_ray(4)
            measure("ray", 4, 4, server.base_url)  # warm-up: start the worker processes
        for backend in backends:
            for workers in WORKERS:
                rows.append((backend, workers, measure(backend, workers, args.prompts,
                                                       server.base_url)))
    print(f"{'backend':8} {'workers':>7} {'sessions/min':>13}")
    for backend, workers, rate in rows:
        print(f"{backend:8} {workers:>7} {rate:>13.0f}")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
