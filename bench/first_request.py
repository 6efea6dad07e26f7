"""Start-up to first answer: a fresh process imports mibyan, builds an ``Agent`` and runs one
conversation against a fake OpenAI server on loopback (in this, the parent, process). Not part
of the test suite; it asserts nothing about speed.

    python bench/first_request.py            # median of 7 fresh processes
    python bench/first_request.py --runs 3 --importtime   # plus the slowest imports of one run
    python bench/first_request.py --compare /tmp/base    # alternate with another checkout

Reported (seconds, in the child, from before its first mibyan import): ``import`` (``from
pipeline import Agent``), ``Agent(...)``, the first ``run_conversation`` (one model call) and the
total; plus ``python -c pass`` for the interpreter's own start. The target of issue 7 is that the
total stays <= 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fake_openai import FakeOpenAIServer, Reply  # noqa: E402

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from pipeline import Agent
t1 = time.perf_counter()
agent = Agent(model="m", base_url=sys.argv[1], api_key="sk-bench", home=sys.argv[2],
              durability="flush", stream=False)
t2 = time.perf_counter()
result = agent.run_conversation("Say hi.")
t3 = time.perf_counter()
assert result["completed"], result
agent.close()
print(json.dumps({"import": t1 - t0, "Agent(...)": t2 - t1, "first request": t3 - t2,
                  "total": t3 - t0, "modules": sorted(sys.modules)}))
"""


# An installed package has its bytecode; this machine's environment sets
# PYTHONDONTWRITEBYTECODE and the venv has none, so every import would compile from source
# (about half of the start-up). Children keep their bytecode in a cache of their own.
PYCACHE = Path(tempfile.gettempdir()) / "mibyan-bench-pycache"


def child(base_url: str, home: str, *flags: str, tree: Path = ROOT
          ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.run([sys.executable, *flags, "-c", CHILD, base_url, home], cwd=tree,
                          env=env, capture_output=True, text=True, check=True)


def report(label: str, rows: dict[str, list[float]], modules: list[str]) -> None:
    print(label)
    for name, values in rows.items():
        print(f"  {name:14} {statistics.median(values):7.3f} s")
    heavy = [m for m in ("openai", "anthropic", "pydantic", "duckdb", "httpx", "httpx2",
                         "structlog", "cattrs", "docstring_parser", "asyncio") if m in modules]
    print(f"  imported by then: {', '.join(heavy)} ({len(modules)} modules)")


def python_start() -> float:
    times = []
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--compare", type=Path, help="another checkout, run alternately")
    args = parser.parse_args()
    trees = {"this tree": ROOT} | ({f"{args.compare}": args.compare} if args.compare else {})
    rows: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    modules: dict[str, list[str]] = {}
    with FakeOpenAIServer(default=Reply.text("hi")) as srv, \
            tempfile.TemporaryDirectory(prefix="mibyan-bench-start-") as home:
        for tree in trees.values():
            child(srv.base_url, home, tree=tree)  # warm the page cache
        for _ in range(args.runs):
            for label, tree in trees.items():
                out = json.loads(child(srv.base_url, home, tree=tree).stdout)
                modules[label] = out.pop("modules")
                for name, seconds in out.items():
                    rows[label].setdefault(name, []).append(seconds)
        print(f"load average {os.getloadavg()[0]:.2f}; median of {args.runs} fresh processes; "
              f"python -c pass: {python_start():.3f} s")
        for label in trees:
            report(label, rows[label], modules[label])
        if args.importtime:
            err = child(srv.base_url, home, "-X", "importtime").stderr
            lines = [line for line in err.splitlines() if line.startswith("import time:")][1:]
            top = sorted(lines, key=lambda line: -int(line.split("|")[0].split(":")[1]))[:25]
            print("slowest imports by own time (us):")
            print("\n".join(top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
