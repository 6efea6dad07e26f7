"""Cost of untrusted-text marking (rules 7): the wider injection scan and the data block.

Prints, for three kinds of text (prose, code, a README dense in the scan's words), the first
scan's and the wider scan's throughput in MB/s, and the cost of marking one tool result as a
data block. Not a test: it asserts nothing; the figures go in the notes of a change.

    uv run python bench/untrusted.py
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import inspect
import json.decoder
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stages.prompt.injection import scan  # noqa: E402
from stages.prompt.injection_wide import scan_wide  # noqa: E402
from stages.prompt.untrusted import boundary, wrap  # noqa: E402

SIZE = 100_000  # characters: the tool executor's cap on a result


def _prose() -> str:
    line = ("The meeting moved to Thursday at ten. Please read the document before and send "
            "your comments to the team; the notes from last week are in the shared folder. ")
    return (line * (SIZE // len(line) + 1))[:SIZE]


def _code() -> str:
    text = "".join(inspect.getsource(m) for m in (argparse, json.decoder, inspect))
    return (text * (SIZE // len(text) + 1))[:SIZE]


def _readme() -> str:
    text = md.distribution("openai").read_text("METADATA") or ""
    return (text * (SIZE // max(1, len(text)) + 1))[:SIZE]


def _rate(scanner: Callable[[str], object], text: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        scanner(text)
        times.append(time.perf_counter() - start)
    return len(text.encode()) / 1e6 / statistics.median(times)


def main() -> int:
    print(f"{'text (100 KB)':<16}{'first scan MB/s':>18}{'wider scan MB/s':>18}")
    for name, text in (("prose", _prose()), ("code", _code()), ("sdk README", _readme())):
        print(f"{name:<16}{_rate(scan, text):>18.2f}{_rate(scan_wide, text):>18.2f}")
    code, result = boundary("session"), _code()
    start = time.perf_counter()
    for _ in range(100):
        wrap(result, name="read_file", code=code)
    per = (time.perf_counter() - start) / 100
    print(f"marking a 100 KB tool result: {per * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
