"""What making an ``Agent`` costs, the first time in a process and after. Not part of the test
suite; it asserts nothing about speed and prints one report.

    python bench/agent_construction.py              # 200 agents after the first
    python bench/agent_construction.py --count 50
    python bench/agent_construction.py --profile    # cProfile of the later ones, top functions

Each agent is made as a caller would, from keywords, with a model and an endpoint given (so no
embedded model starts and nothing is contacted: construction opens no connection), in one
fresh home without a ``config.toml``. The first construction pays for the imports it triggers
and the plugin discovery (``pipeline.hooks``, once per process); the figures after it are the
cost every further agent of a gateway, a batch or a test pays.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.agent import Agent  # noqa: E402


def make(home: Path) -> Agent:
    return Agent(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", home=home)


def timed(home: Path) -> float:
    started = time.perf_counter()
    make(home).close()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mibyan-bench-agent-") as tmp:
        home = Path(tmp)
        first = timed(home)
        later = [timed(home) for _ in range(args.count)]
        ms = [t * 1000 for t in later]
        print(f"first agent      {first * 1000:8.2f} ms")
        print(f"next {args.count:<5} agents  median {statistics.median(ms):.3f} ms  "
              f"min {min(ms):.3f} ms  max {max(ms):.3f} ms")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.count):
                make(home).close()
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
