"""What mibyan's own machinery costs per text turn, with the model taken out: a client that
answers at once (no HTTP, no server), turns of ``run_conversation(message,
conversation_history=...)`` as the bench's reset turns make them. Not part of the test suite.

    uv run python bench/turn_machinery.py                 # process CPU per turn, calls per turn
    uv run python bench/turn_machinery.py --history 200  # the caller hands 200 messages each turn
    uv run python bench/turn_machinery.py --ir           # instructions per turn (valgrind)

* CPU: ``time.process_time`` over rounds of turns (both threads: the model call's hand-off is
  in it); the minimum and quartiles of the rounds, as the machine's noise only adds.
* calls: Python and built-in function calls per turn (``cProfile``), the same on every run.
* ``--ir``: user-space instructions per turn under ``valgrind --tool=callgrind``, from two runs
  of different lengths (so imports and set-up cancel out), with a fixed hash seed (unseeded,
  runs of one tree differ by up to 3%); the same on every run, so a change of a few per cent
  shows on a noisy machine. Takes about a minute and a half.

See bench/README.md ("Issue 29, item 1: the machinery of a text turn").
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REPLY = "The capital of France is Paris. " * 12
MESSAGE = "hello " * 60
MESSAGE_CHARS = 400


class Instant:
    """A model client that answers every call at once with the same text, called where the
    shipped adapters are (on the turn's own thread: ``stops_on_cancel``)."""

    def stops_on_cancel(self, request: Any) -> bool:
        del request
        return True

    def complete(self, request: Any, *, on_delta: Any = None, cancel: Any = None) -> Any:
        from stages.log.events import ModelReplied, Usage
        from stages.log.messages import Message
        return ModelReplied(message=Message(role="assistant", content=REPLY),
                            finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=100),
                            model="m", latency_ms=1.0)


def history(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"[{i}] " + ("lorem ipsum " * 40)[:MESSAGE_CHARS]} for i in range(n)]


def turns(n_history: int) -> tuple[Any, Any]:
    """An agent on an instant client, and one turn of it."""
    from pipeline.agent import Agent
    agent = Agent(client=Instant(), home=Path(tempfile.mkdtemp(prefix="mibyan-bench-")),
                  durability="flush", stream=False)
    prior = history(n_history)

    def turn() -> None:
        result = agent.run_conversation(MESSAGE, conversation_history=prior)
        assert result["final_response"] == REPLY, result["turn_exit_reason"]
    return agent, turn


def cpu(n_history: int, rounds: int, per_round: int) -> list[float]:
    agent, turn = turns(n_history)
    for _ in range(50):
        turn()
    samples = []
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(per_round):
            turn()
        samples.append((time.process_time() - t0) / per_round * 1e6)
    agent.close()
    return samples


def calls(n_history: int, n: int = 100) -> float:
    agent, turn = turns(n_history)
    for _ in range(30):
        turn()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        turn()
    profiler.disable()
    agent.close()
    raw: dict = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    return sum(entry[1] for entry in raw.values()) / n


def instructions(n_history: int) -> float:
    def run(n: int) -> int:
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out",
                 sys.executable, __file__, "--only-turns", str(n), "--history", str(n_history)],
                capture_output=True, text=True, check=True, cwd=ROOT,
                env={**os.environ, "PYTHONHASHSEED": "0"})
        found = re.search(r"Collected : (\d+)", out.stderr)
        assert found, out.stderr[-2000:]
        return int(found.group(1))
    return (run(60) - run(10)) / 50


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=0, help="messages handed in each turn")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--per-round", type=int, default=100)
    parser.add_argument("--ir", action="store_true", help="instructions per turn (valgrind)")
    parser.add_argument("--only-turns", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only_turns is not None:  # one run under valgrind
        agent, turn = turns(args.history)
        for _ in range(args.only_turns):
            turn()
        agent.close()
        return 0
    print(f"tree {ROOT}; {args.history} messages handed in; load {os.getloadavg()[0]:.2f}")
    if args.ir:
        print(f"instructions per turn: {instructions(args.history):,.0f}")
        return 0
    samples = sorted(cpu(args.history, args.rounds, args.per_round))
    print(f"process CPU per turn: min {samples[0]:.0f} us, p25 {samples[len(samples) // 4]:.0f}, "
          f"median {statistics.median(samples):.0f} ({args.rounds} rounds of {args.per_round})")
    print(f"calls per turn: {calls(args.history):,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
