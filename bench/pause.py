"""What pausing for approvals and steering cost (issue 27 items 3 and 4).

    uv run python -m bench.pause [--turns 200] [--rounds 5]

Measured, each the median of ``--rounds`` runs:

* pause: a turn that stops for an approval (the model's call, the plan, ``approvals_pending``);
* resume elsewhere: a new ``Agent`` on the paused session of ``--turns`` earlier turns opens
  it (its log read and folded), lists the pending call and goes on with a decision to the
  turn's end (a scripted model: no network), as a second process does;
* the steering check at every step boundary (``stages.turn.steering.steerable``) on a history
  of that size: it must not grow with the history (rules 8 of the house: cost grows with what
  is new).

Targets (checked; the exit status is 1 when one is missed): resume elsewhere under 1.5 s at
200 earlier turns on 2 busy cores; the steering check under 20 microseconds, at any size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.agent import Agent  # noqa: E402
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls  # noqa: E402
from pipeline.tools import tool  # noqa: E402
from stages.turn.steering import steerable  # noqa: E402

RESUME_TARGET_S = 1.5
STEER_TARGET_US = 20.0


@tool(requires_approval=True)
def deploy(target: str) -> str:
    """Deploy.

    Args:
        target: where
    """
    return f"deployed {target}"


def _agent(home: Path, model: ScriptedModel, session_id: str | None = None) -> Agent:
    return Agent(client=model, tools=[deploy], home=home, clock=FakeClock(), ids=CountingIds(),
                 approvals="pause", session_id=session_id, durability="flush")


def one_round(home: Path, turns: int) -> tuple[float, float, float]:
    """(seconds to pause, seconds to resume elsewhere, microseconds per steering check)."""
    chatter = ["answer " + "x" * 400 for _ in range(turns)]
    model = ScriptedModel(*chatter, tool_calls(("deploy", {"target": "prod"})), "done")
    with _agent(home, model) as first:
        for i in range(turns):
            first.run(f"question {i} " + "y" * 400)
        start = time.perf_counter()
        paused = first.run("deploy")
        pause_s = time.perf_counter() - start
        assert paused.paused
        session_id = first.session_id
        state = first._runner.state if first._runner is not None else None
    assert state is not None and state.settings is not None
    checks = 10_000
    start = time.perf_counter()
    for _ in range(checks):
        steerable(state, state.settings)
    steer_us = (time.perf_counter() - start) / checks * 1e6
    start = time.perf_counter()
    with _agent(home, model, session_id) as second:
        [call] = second.pending_approvals
        done = second.resume({call.call_id: "once"})
    resume_s = time.perf_counter() - start
    assert done.completed
    return pause_s, resume_s, steer_us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for n in range(args.rounds):
            results.append(one_round(Path(scratch) / f"home{n}", args.turns))
    pause_s, resume_s, steer_us = (statistics.median(r[i] for r in results) for i in range(3))
    print(f"{args.turns} earlier turns, median of {args.rounds}:")
    print(f"  pause (the call, the plan, approvals_pending): {pause_s * 1000:8.1f} ms")
    print(f"  resume elsewhere (open, fold, decide, finish): {resume_s * 1000:8.1f} ms "
          f"(target < {RESUME_TARGET_S * 1000:.0f} ms)")
    print(f"  steering check per step boundary:             {steer_us:8.2f} us "
          f"(target < {STEER_TARGET_US:.0f} us)")
    ok = resume_s < RESUME_TARGET_S and steer_us < STEER_TARGET_US
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
