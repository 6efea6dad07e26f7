"""Cost of untrusted-text marking (rules 7): the wider injection scan and the data block.

Prints, for five kinds of tool output (prose, code, a build log, JSON, and a README dense in
the scan's words), the first scan's and the wider scan's throughput in MB/s, and the cost of
marking one tool result as a data block. Not a test: it asserts nothing; the figures go in
the notes of a change.

    uv run python bench/untrusted.py
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import inspect
import json.decoder
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


def _log() -> str:
    lines = []
    for n in range(4000):
        lines.append(f"2026-12-02T04:{n % 60:02d}:{n % 59:02d}.{n:06d}Z INFO  worker-{n % 7} "
                     f"GET /api/v1/items/{n * 37 % 9973}?page={n % 11} 200 {n % 900}ms "
                     f"user_id={n * 13 % 4093} trace=0x{n * 2654435761 % 2**32:08x}")
        if n % 50 == 0:
            lines.append(f"tests/test_mod_{n}.py::test_case_{n} PASSED [{n % 100:3d}%]")
        if n % 97 == 0:
            lines.append('Traceback (most recent call last):\n  File "app/main.py", line 12, '
                         'in handler\n    raise KeyError(key)\nKeyError: \'session\'')
    text = "\n".join(lines)
    return (text * (SIZE // len(text) + 1))[:SIZE]


def _json() -> str:
    import json
    items = [{"id": n, "name": f"package-{n}", "version": f"1.{n % 17}.{n % 5}",
              "description": "A small library that parses and formats things; see the docs.",
              "url": f"https://example.org/p/{n}", "sha256": f"{n * 2654435761:064x}",
              "tags": ["util", "parser", f"t{n % 9}"], "stars": n * 7 % 1000,
              "updated": "2026-11-30T12:00:00Z", "license": "MIT"} for n in range(400)]
    text = json.dumps({"items": items, "total": len(items)}, indent=2)
    return (text * (SIZE // len(text) + 1))[:SIZE]


def _rate(scanner: Callable[[str], object], text: str, runs: int = 5) -> float:
    """MB/s of the best CPU time of ``runs``: the machine is shared, wall time is noise."""
    times = []
    for _ in range(runs):
        start = time.process_time()
        scanner(text)
        times.append(time.process_time() - start)
    return len(text.encode()) / 1e6 / max(min(times), 1e-6)


def main() -> int:
    print(f"{'text (100 KB)':<16}{'first scan MB/s':>18}{'wider scan MB/s':>18}")
    for name, text in (("prose", _prose()), ("code", _code()), ("build log", _log()),
                       ("JSON", _json()), ("sdk README", _readme())):
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
