"""What the async path costs per turn: ``await agent.arun(...)`` and ``async for event in
agent.stream(...)`` against ``agent.run(...)``, the same agent and the same fake OpenAI server on
loopback, turn for turn. Not part of the test suite; prints the medians.

    uv run python bench/async_overhead.py [--turns 20] [--rounds 25]

Each variant runs ``turns`` text turns per round (streamed replies, durability "flush"), the
variants in turn within a round and many short rounds, so noise on a shared machine hits them
alike. The overhead of
a variant is its median turn time less run()'s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.agent import Agent  # noqa: E402
from tests.fake_openai import FakeOpenAIServer, Reply  # noqa: E402


def sync_turns(agent: Agent, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        agent.run("hi")
        times.append(time.perf_counter() - t0)
    return times


async def arun_turns(agent: Agent, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await agent.arun("hi")
        times.append(time.perf_counter() - t0)
    return times


async def stream_turns(agent: Agent, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        async for _event in agent.stream("hi"):
            pass
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"run()": [], "await arun()": [], "async for stream()": []}
    with FakeOpenAIServer(default=Reply.text("ok, done.")) as server, \
            tempfile.TemporaryDirectory() as scratch:
        variants = {}
        for name in results:
            variants[name] = Agent(model="fake-model", base_url=server.base_url,
                                   api_key="sk-bench-0000000000000000", stream=True,
                                   home=Path(scratch) / name.split()[-1], durability="flush",
                                   load_context=False)
        sync_turns(variants["run()"], 5)  # warm-up: imports, first connections
        asyncio.run(arun_turns(variants["await arun()"], 5))
        asyncio.run(stream_turns(variants["async for stream()"], 5))
        for _ in range(args.rounds):
            results["run()"] += sync_turns(variants["run()"], args.turns)
            results["await arun()"] += asyncio.run(
                arun_turns(variants["await arun()"], args.turns))
            results["async for stream()"] += asyncio.run(
                stream_turns(variants["async for stream()"], args.turns))
        for agent in variants.values():
            agent.close()
    base = statistics.median(results["run()"])
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.turns} turns "
          "per variant, the fake server on loopback, streamed replies")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"  {name:20} median {median * 1e3:7.2f} ms per turn   "
              f"p90 {statistics.quantiles(times, n=10)[-1] * 1e3:7.2f} ms   "
              f"overhead {(median - base) * 1e3:+6.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
