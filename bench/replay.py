"""Replay throughput and where its time goes. Not part of the test suite; it asserts nothing
about speed and prints one report.

    python bench/replay.py                 # 200 tool turns (about 1,600 events), 5 replays
    python bench/replay.py --turns 40      # a smaller session
    python bench/replay.py --profile       # cProfile of one replay, top functions
    python bench/replay.py --sessions 8    # also ``replay --all`` of 8 such sessions, on one
                                           # process and on one per core
    python bench/replay.py --trees /tmp/old .   # the same recorded session replayed by each
                                           # tree (a ``git worktree``), in turns, 3 rounds

A live session is recorded once against the in-tree fake OpenAI server (each turn a tool call,
its result and a text answer), then replayed ``--repeats`` times; the figures are the medians
of the wall time and of the process's CPU time (the steadier one when the machine is shared),
and the best CPU time (to compare two trees run alternately).
The parts: reading and checking the envelopes (JSON, seq, hash chain, seals), decoding the
payloads into events, folding them (what opening a session costs), and the whole replay.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from effects.eventlog.codec import from_payload  # noqa: E402
from effects.eventlog.store import read_envelopes, session_path  # noqa: E402
from pipeline.agent import Agent  # noqa: E402
from pipeline.shell.replay import replay  # noqa: E402
from pipeline.tools import tool  # noqa: E402
from stages import fold
from tests.fake_openai import FakeOpenAIServer, Reply  # noqa: E402

_LOREM = ("The quick brown fox jumps over the lazy dog while the agent loop reads its event log "
          "and replays every stage of the session from the first record to the last. ")


def text(i: int, chars: int = 200) -> str:
    return (f"[{i}] " + _LOREM * (chars // len(_LOREM) + 1))[:chars]


@tool(read_only=True)
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return text(len(query))


def record_session(home: Path, turns: int) -> str:
    with FakeOpenAIServer(default=Reply.text("ok")) as srv:
        for i in range(turns):
            srv.script(Reply.tool_calls([("lookup", json.dumps({"query": f"q{i}"}))]),
                       Reply.text(text(i)))
        with Agent(model="m", base_url=srv.base_url, api_key="sk-bench", home=home,
                   durability="flush", stream=False, tools=[lookup]) as agent:
            for i in range(turns):
                result = agent.run_conversation(text(i))
                assert result["completed"], result
            return agent.session_id


def timings(fn: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """Median wall time, median CPU time of the process (steadier on a shared machine) and
    best CPU time (the steadiest, to compare two trees run alternately)."""
    walls, cpus = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), min(cpus)


def replay_all(home: Path, root: Path, session_id: str, sessions: int) -> None:
    """``mibyan replay --all`` (a process of its own, as a user runs it) over ``sessions``
    copies of the session (each its own id), on one process and on one per core."""
    import subprocess

    from effects.eventlog.store import session_path as path_of
    lines = path_of(root, session_id).read_bytes()
    for i in range(1, sessions):
        copy_id = f"{session_id}-{i}"
        # A copy under another id must chain under that id: re-encode every record.
        write_copy(lines, path_of(root, copy_id), copy_id)
    for jobs in sorted({1, os.cpu_count() or 1}):
        done = subprocess.run([sys.executable, "-m", "pipeline.cli.main", "--home", str(home),
                               "replay", "--all", "--jobs", str(jobs)], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        print(f"  replay --all, {jobs} process{'es' if jobs > 1 else ' '}: "
              f"{done.stdout.strip().splitlines()[-1]}")


def write_copy(lines: bytes, path: Path, session_id: str) -> None:
    from effects.eventlog.envelope import decode_line, encode_line, line_hash
    prev, out = "0" * 64, []
    for raw in lines.splitlines():
        e = decode_line(raw)
        payload = e.payload
        if e.kind == "session_started":
            payload = {**payload, "session_id": session_id}
        line = encode_line(session_id, e.seq, e.kind, e.schema_version, e.recorded_at, prev,
                           payload)
        prev = line_hash(line)
        out.append(line)
    path.write_bytes(b"\n".join(out) + b"\n")


# Run by each tree's own interpreter path, so that the tree's code is what replays.
_TREE_RUN = """
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
try:
    from pipeline.shell.replay import replay
except ImportError:  # a tree from before pipeline/shell/
    from pipeline.replay import replay
root, session_id, repeats = Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
report = replay(root, session_id)
assert report.identical, report.describe()
best = float("inf")
for _ in range(repeats):
    started = time.process_time()
    replay(root, session_id)
    best = min(best, time.process_time() - started)
print(report.events / best)
"""


def compare_trees(trees: list[Path], root: Path, session_id: str, repeats: int,
                  rounds: int = 3) -> None:
    """Each tree replays the one recorded session ``repeats`` times, the trees in turns for
    ``rounds`` rounds (the VM's speed moves: compare trees within a round)."""
    import subprocess
    for number in range(1, rounds + 1):
        for tree in trees:
            done = subprocess.run([sys.executable, "-c", _TREE_RUN, str(tree.resolve()),
                                   str(root), session_id, str(repeats)],
                                  capture_output=True, text=True, check=True, cwd=tree)
            print(f"  round {number}  {tree!s:30} best {float(done.stdout):10,.0f} events/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sessions", type=int, default=0)
    parser.add_argument("--trees", type=Path, nargs="+", default=[])
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mibyan-bench-replay-"))
    try:
        session_id = record_session(home, args.turns)
        root = home / "sessions"
        if args.trees:
            compare_trees(args.trees, root, session_id, max(args.repeats, 15))
            return 0
        path = session_path(root, session_id)
        envelopes = list(read_envelopes(path))
        events = [from_payload(e.kind, e.schema_version, e.payload) for e in envelopes]
        n = len(envelopes)
        report = replay(root, session_id)
        assert report.identical, report.describe()
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(replay, root, session_id)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
            return 0
        parts = {
            "read_envelopes": lambda: list(read_envelopes(path)),
            "from_payload": lambda: [from_payload(e.kind, e.schema_version, e.payload)
                                     for e in envelopes],
            "fold": lambda: fold(events),
            "replay": lambda: replay(root, session_id),
        }
        print(f"session: {args.turns} turns, {n} events, {path.stat().st_size:,} bytes; "
              f"load average {os.getloadavg()[0]:.2f}; {args.repeats} runs of each")
        print(f"  {'':16} {'wall, median':>12}          {'':8}   {'CPU, median':>12}"
              f"          {'':8}   {'CPU, best':>10}")
        for name, fn in parts.items():
            seconds, cpu, best = timings(fn, args.repeats)
            print(f"  {name:16} {n / seconds:10,.0f} events/s {seconds * 1000:8.1f} ms   "
                  f"{n / cpu:10,.0f} events/s {cpu * 1000:8.1f} ms   "
                  f"{n / best:10,.0f} events/s")
        print(f"  ({report.describe()}; load average {os.getloadavg()[0]:.2f})")
        if args.sessions:
            replay_all(home, root, session_id, args.sessions)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
