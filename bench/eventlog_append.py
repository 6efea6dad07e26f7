"""What sealing each line with its own hash costs: µs per append, and the reading side.

Not part of the test suite; it asserts nothing. It measures the tree it is given, so the same
script compares two versions of the event log::

    python bench/eventlog_append.py                   # this tree
    python bench/eventlog_append.py --tree /tmp/orig  # another checkout (e.g. before a change)

Each figure is the best and the median of 7 batches (on a busy machine, compare the best):
``SessionLog.append`` in flush mode (encode, seal, hash chain, one ``write()``) of a record of
about 600 bytes; ``read_envelopes`` and ``verify`` of a 10,000-record log; ``SessionLog.open`` of
that log (the scan that finds a torn tail).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

RECORDS = 10_000
BATCHES = 7
T0 = "2026-01-01T00:00:00.000000+00:00"
PAYLOAD = {  # about the size of a short ModelReplied
    "finish_reason": "stop", "latency_ms": 812.345, "model": "gpt-4o-mini",
    "message": {"role": "assistant", "content": "It is sunny in Oslo today. " * 4,
                "tool_calls": [], "reasoning": None},
    "usage": {"input_tokens": 1234, "output_tokens": 56, "cache_read_tokens": 0,
              "cache_write_tokens": 0, "reasoning_tokens": 0},
}


def _us(run, n: int) -> str:
    """Best and median µs per record over the batches."""
    samples = []
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        run(n)
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return f"{min(samples):6.2f} (median {statistics.median(samples):6.2f}) us/record"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    from effects.eventlog.store import SessionLog, read_envelopes, verify

    root = Path(tempfile.mkdtemp(prefix="mibyan-bench-append-"))
    try:
        with SessionLog.open(root, "bench", durability="flush") as log:
            log.append("session_started", 1, {}, T0)

            def append(n: int) -> None:
                for _ in range(n):
                    log.append("model_replied", 1, PAYLOAD, T0)

            append(200)  # warm-up
            per_append = _us(append, 2_000)
        with SessionLog.open(root, "read", durability="flush") as log:
            log.append_many([("session_started", 1, {}, T0)]
                            + [("model_replied", 1, PAYLOAD, T0)] * (RECORDS - 1))
        path = log.path
        line_bytes = os.path.getsize(path) / RECORDS
        reading = _us(lambda n: sum(1 for _ in read_envelopes(path)), RECORDS)
        verifying = _us(lambda n: verify(path), RECORDS)
        opening = _us(lambda n: SessionLog.open(root, "read").close(), RECORDS)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"tree {args.tree} | load {os.getloadavg()[0]:.2f} | line {line_bytes:.0f} bytes")
    print(f"SessionLog.append (flush)   {per_append}")
    print(f"read_envelopes              {reading}")
    print(f"verify                      {verifying}")
    print(f"SessionLog.open (scan)      {opening}")


if __name__ == "__main__":
    main()
