"""Parts of a text turn's own CPU, timed apart (``time.thread_time``, best of 7 rounds):

* checking a turn's five records before they are written (``journal.encode``: the plain
  path or the codec's read-back), each and in all;
* appending them to a session log (encode, hash, sign, ``write``);
* the model call made on this thread (``ModelClient.complete``) against a whole floor turn
  (a bare ``httpx2`` loop), alternated in one process against the fake server.

    uv run python bench/turn_parts.py                   # this tree
    uv run python bench/turn_parts.py --tree /tmp/base  # another checkout, same interpreter

Alternate the two on a loaded machine; see bench/README.md ("Issue 29, item 1: a turn's own
CPU").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _best(fn: Any, n: int) -> float:
    """Microseconds of this thread's CPU per call, best of 7 rounds of ``n``."""
    rounds = []
    for _ in range(7):
        t0 = time.thread_time_ns()
        for _ in range(n):
            fn()
        rounds.append((time.thread_time_ns() - t0) / n / 1000)
    return min(rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the checkout to time (default: this one)")
    parser.add_argument("--calls", type=int, default=100, help="model calls per round")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent
    sys.path[:0] = [str(args.tree), str(here)]
    import bench  # the workload and the fake server of bench.py
    import effects.model_call as model_call
    from effects.eventlog.codec import from_payload
    from effects.eventlog.store import SessionLog, read_envelopes
    from pipeline.shell.journal import encode

    home = Path(tempfile.mkdtemp(prefix="mibyan-parts-"))
    seen: dict[str, Any] = {}
    real_call = model_call.call_model

    def spy(model: Any, request: Any, **kw: Any) -> Any:
        seen["model"], seen["request"] = model, request
        return real_call(model, request, **kw)

    import effects.performers as performers
    performers.call_model = spy  # type: ignore[assignment]
    with bench.RemoteServer() as srv:
        loop = bench.MibyanLoop(srv, [], stream=False, durability="flush", home=home)
        for i in range(5):
            loop.turn(bench.text(i), reset=True)
        loop.close()
        path = next(home.rglob("*.jsonl"))
        turn = [from_payload(e.kind, e.schema_version, e.payload)
                for e in read_envelopes(path)][-5:]
        checks = {e.kind: _best(lambda e=e: encode(e), 5000) for e in turn}
        print(f"tree {args.tree}")
        print("checking the records: " + ", ".join(f"{k} {v:.1f}" for k, v in checks.items())
              + f"; in all {sum(checks.values()):.1f} us")
        payloads = [(e.kind, e.schema_version, encode(e)) for e in turn]
        with SessionLog.open(home / "parts", "parts1", durability="flush") as log:
            log.append("session_started", 1, {}, "t")

            def append_turn() -> None:
                for kind, version, payload in payloads:
                    log.append(kind, version, payload, "2026-01-01T00:00:00.000000+00:00")
            print(f"appending them: {_best(append_turn, 1000):.1f} us")
        floor = bench.FloorLoop(srv, [], stream=False)
        model, request = seen["model"], seen["request"]
        timed: dict[str, list[float]] = {"model call": [], "floor turn": []}
        for _ in range(8):
            t0 = time.thread_time()
            for _ in range(args.calls):
                model.complete(request)
            timed["model call"].append((time.thread_time() - t0) * 1000 / args.calls)
            t0 = time.thread_time()
            for i in range(args.calls):
                floor.turn(bench.text(i), reset=True)
            timed["floor turn"].append((time.thread_time() - t0) * 1000 / args.calls)
        floor.close()
        for name, values in timed.items():
            print(f"{name}: median {statistics.median(values):.3f} ms "
                  f"({min(values):.3f}-{max(values):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
