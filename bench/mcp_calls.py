"""What an MCP tool costs: starting a server and listing its tools, and one call, over stdio
and streamable HTTP, against the tests' SDK server (tests/pipeline/mcp_server.py), beside a
plain Python tool. Not part of the test suite; it asserts nothing about speed.

    python bench/mcp_calls.py                # 200 calls per transport
    python bench/mcp_calls.py --calls 1000
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.mcp_tools import mcp_tools  # noqa: E402
from pipeline.tools import Tool  # noqa: E402

SERVER = str(ROOT / "tests" / "pipeline" / "mcp_server.py")


def _calls(tool: Tool, n: int) -> list[float]:
    times = []
    for i in range(n):
        start = time.perf_counter()
        tool.invoke(f'{{"a": {i}, "b": 1}}')
        times.append(time.perf_counter() - start)
    return times


def _line(label: str, times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    return (f"{label:<28} median {statistics.median(ms):7.3f} ms   "
            f"p90 {ms[int(len(ms) * 0.9)]:7.3f} ms   ({len(ms)} calls)")


def _measure(label: str, server: dict, calls: int) -> None:
    start = time.perf_counter()
    with mcp_tools(server) as tools:
        started = time.perf_counter() - start
        add = next(t for t in tools if t.name.endswith("__add"))
        add.invoke('{"a": 0, "b": 0}')  # warm
        print(f"{label:<28} start + list {started * 1000:8.1f} ms")
        print(_line(f"{label} call", _calls(add, calls)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    plain = Tool.from_function(lambda a, b: str(a + b), name="add")
    print(_line("plain python tool", _calls(plain, args.calls)))
    _measure("stdio", {"name": "s", "command": sys.executable, "args": [SERVER, "stdio"]},
             args.calls)
    web = subprocess.Popen([sys.executable, SERVER, "http"], stdout=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        assert web.stdout is not None
        port = int(web.stdout.readline().split()[1])
        _measure("streamable http", {"name": "h", "url": f"http://127.0.0.1:{port}/mcp"},
                 args.calls)
    finally:
        web.terminate()
        web.wait(timeout=10)


if __name__ == "__main__":
    main()
