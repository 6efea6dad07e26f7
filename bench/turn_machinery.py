"""What mibyan's own machinery costs per text turn, with the model taken out: a client that
answers at once (no HTTP, no server), turns of ``run_conversation(message,
conversation_history=...)`` as the bench's reset turns make them. Not part of the test suite.

    uv run python bench/turn_machinery.py                 # process CPU per turn, calls per turn
    uv run python bench/turn_machinery.py --history 200  # the caller hands 200 messages each turn
    uv run python bench/turn_machinery.py --ir           # instructions per turn (valgrind)
    uv run python bench/turn_machinery.py --wire [--ir]  # beside the bare loop, over loopback

* CPU: ``time.process_time`` over rounds of turns (both threads: the model call's hand-off is
  in it); the minimum and quartiles of the rounds, as the machine's noise only adds.
* calls: Python and built-in function calls per turn (``cProfile``), the same on every run.
* ``--ir``: user-space instructions per turn under ``valgrind --tool=callgrind``, from two runs
  of different lengths (so imports and set-up cancel out), with a fixed hash seed (unseeded,
  runs of one tree differ by up to 3%); the same on every run, so a change of a few per cent
  shows on a noisy machine. Takes about a minute and a half.
* ``--wire``: the same turn made over loopback against the bench's fake OpenAI server (in a
  process of its own, as ``bench.py`` runs it), beside the bare ``httpx2`` loop that is item 1's
  floor, in one interleaved run: ``floor``; ``call`` (the request the agent's turn sent, sent
  again through the shipped adapter alone); ``agent`` (the whole turn); ``floor+instant`` (a
  floor turn, then an instant-client turn: the machinery beside an HTTP exchange, as it runs in
  a real turn, caches and all); ``floor+records`` (a floor turn, then ``--records``' loop).
  With ``--ir``, instructions per turn instead of CPU (about seven minutes): the floor's ratio
  without the machine's noise. ``--stream``: streamed turns.
* ``--records``: a turn's five records alone, made again with nothing deciding them (redacted
  where observed, checked, folded, appended): what the log's contract costs per turn.

See bench/README.md ("Issue 29, item 1: the machinery of a text turn" and "... what the
log's records alone cost").
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
from collections.abc import Callable
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


Maker = Callable[[int], tuple[Any, Callable[[], None]]]


def cpu(make: Maker, n_history: int, rounds: int, per_round: int) -> list[float]:
    agent, turn = make(n_history)
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


def calls(make: Maker, n_history: int, n: int = 100) -> float:
    agent, turn = make(n_history)
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


def _collected(args: list[str], n_history: int) -> int:
    """Instructions of one run of this script with ``args`` under callgrind (a server it
    starts runs outside valgrind)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out",
             sys.executable, __file__, *args, "--history", str(n_history)],
            capture_output=True, text=True, check=True, cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", out.stderr)
    assert found, out.stderr[-2000:]
    return int(found.group(1))


def instructions(n_history: int, flags: list[str]) -> float:
    return (_collected([*flags, "--only-turns", "60"], n_history)
            - _collected([*flags, "--only-turns", "10"], n_history)) / 50


def records(n_history: int) -> tuple[Any, Any]:
    """An agent on an instant client, and its last turn's records made again with nothing
    deciding them: each event redacted where it is observed, checked, folded and appended
    (hash chain, seal, signature, write), from the state the turn began with. What a turn
    costs under this log's contract, whatever machine decides it."""
    agent, turn = turns(n_history)
    for _ in range(3):
        turn()
    runner = agent._runner
    made: list[Any] = []
    before = runner.state
    runner.listener = made.append
    turn()
    runner.listener = None
    journal = runner.journal

    def again() -> None:
        runner.state = before
        for event in made:
            if event.observed:
                event = journal._redacted(event)
            runner._append("records", event)
    return agent, again


def wire_loops(n_history: int, stream: bool) -> tuple[Any, dict[str, Any]]:
    """The bench's fake server (own process) and the loops beside it, by name; the server is
    a context manager the caller closes."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench import FloorLoop, MibyanLoop, RemoteServer, prior_history, text
    srv = RemoteServer()
    prior = prior_history(n_history)
    floor = FloorLoop(srv, prior, stream=stream)
    mibyan = MibyanLoop(srv, prior, stream=stream, durability="flush",
                        home=Path(tempfile.mkdtemp(prefix="mibyan-bench-")))
    router = mibyan.agent.model_client
    sent: list[Any] = []
    complete = router.complete

    def keep(request: Any, **options: Any) -> Any:
        sent.append(request)
        return complete(request, **options)
    router.complete = keep
    mibyan.turn(text(0), reset=True)
    router.complete = complete
    adapter = router._client(sent[0])
    _, instant = turns(n_history)
    _, records_again = records(n_history)
    loops = {"floor": lambda: floor.turn(text(1), reset=True),
             "call": lambda: adapter.complete(sent[0]),
             "agent": lambda: mibyan.turn(text(2), reset=True)}
    loops["floor+instant"] = lambda: (loops["floor"](), instant())
    loops["floor+records"] = lambda: (loops["floor"](), records_again())
    return srv, loops


def wire_cpu(n_history: int, stream: bool, rounds: int, per_round: int
             ) -> dict[str, list[float]]:
    srv, loops = wire_loops(n_history, stream)
    with srv:
        for loop in loops.values():
            for _ in range(per_round):
                loop()
        samples: dict[str, list[float]] = {name: [] for name in loops}
        for _ in range(rounds):  # interleaved: the machine's moods fall on every loop alike
            for name, loop in loops.items():
                t0 = time.process_time()
                for _ in range(per_round):
                    loop()
                samples[name].append((time.process_time() - t0) / per_round * 1e6)
    return samples


def wire_instructions(n_history: int, stream: bool) -> dict[str, float]:
    flags = ["--stream"] if stream else []
    return {name: (_collected([*flags, "--only-wire", name, "--only-turns", "120"], n_history)
                   - _collected([*flags, "--only-wire", name, "--only-turns", "20"], n_history))
            / 100 for name in ("floor", "call", "agent", "floor+instant", "floor+records")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=0, help="messages handed in each turn")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--per-round", type=int, default=100)
    parser.add_argument("--ir", action="store_true", help="instructions per turn (valgrind)")
    parser.add_argument("--wire", action="store_true",
                        help="beside the bare httpx2 loop, against the bench's fake server")
    parser.add_argument("--stream", action="store_true",
                        help="with --wire: streamed turns (the floor's too)")
    parser.add_argument("--records", action="store_true",
                        help="a turn's records alone, with nothing deciding them")
    parser.add_argument("--only-turns", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--only-wire", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only_wire is not None:  # one loop's run under valgrind
        srv, loops = wire_loops(args.history, args.stream)
        with srv:
            for _ in range(10 + args.only_turns):  # the first few warm every loop's caches
                loops[args.only_wire]()
        return 0
    make = records if args.records else turns
    if args.only_turns is not None:  # one run under valgrind
        agent, turn = make(args.history)
        for _ in range(args.only_turns):
            turn()
        agent.close()
        return 0
    print(f"tree {ROOT}; {args.history} messages handed in; load {os.getloadavg()[0]:.2f}")
    if args.wire:
        return report_wire(args)
    if args.ir:
        flags = ["--records"] if args.records else []
        print(f"instructions per turn: {instructions(args.history, flags):,.0f}")
        return 0
    samples = sorted(cpu(make, args.history, args.rounds, args.per_round))
    print(f"process CPU per turn: min {samples[0]:.0f} us, p25 {samples[len(samples) // 4]:.0f}, "
          f"median {statistics.median(samples):.0f} ({args.rounds} rounds of {args.per_round})")
    print(f"calls per turn: {calls(make, args.history):,.0f}")
    return 0


def report_wire(args: argparse.Namespace) -> int:
    if args.ir:
        counts = wire_instructions(args.history, args.stream)
        for name, count in counts.items():
            print(f"{name:14} {count:12,.0f} instructions per turn  "
                  f"{count / counts['floor']:5.2f}x the floor")
        return 0
    samples = wire_cpu(args.history, args.stream, args.rounds, args.per_round // 2)
    floor = statistics.median(samples["floor"])
    for name, values in samples.items():
        values.sort()
        print(f"{name:14} process CPU per turn: min {values[0]:5.0f} us, p25 "
              f"{values[len(values) // 4]:5.0f}, median {statistics.median(values):5.0f}  "
              f"{statistics.median(values) / floor:5.2f}x the floor's median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
