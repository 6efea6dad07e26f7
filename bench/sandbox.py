"""The sandbox's cost per command: ``terminal("true")`` (and a small real command) sandboxed
under bubblewrap, against the same commands unconfined (full access: the watchdog shell), both
through the terminal tool as the agent runs them. Rounds alternate the two so that noise on a
shared machine hits both alike.

    python -m bench.sandbox [--rounds 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from effects.tools.sandbox import SandboxPolicy, probe
from effects.tools.terminal import Terminal
from effects.tools.workspace import Workspace

COMMANDS = ("true", "ls -la && grep -c def *.py")


def _ms(terminal: Terminal, command: str) -> float:
    start = time.perf_counter()
    result = terminal.terminal(command)
    elapsed = (time.perf_counter() - start) * 1000
    assert result["exit_code"] == 0, result
    return elapsed


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    rounds = parser.parse_args().rounds
    started = probe()
    if not started.started:
        raise SystemExit(f"no sandbox can start here: {started.detail}")
    with tempfile.TemporaryDirectory() as tmp:
        tree, home = Path(tmp) / "tree", Path(tmp) / "home"
        tree.mkdir()
        home.mkdir()
        for n in range(20):
            (tree / f"m{n}.py").write_text("def f():\n    return 1\n" * 50)
        confined, free = Terminal(Workspace(root=tree)), Terminal(Workspace(root=tree))
        confined.confine(SandboxPolicy(home=home))
        free.confine(SandboxPolicy(mode="full-access", home=home))
        print(f"bwrap: {started.detail}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
              f"{rounds} rounds")
        for command in COMMANDS:
            times: dict[str, list[float]] = {"sandboxed": [], "unconfined": []}
            for _ in range(5):  # warm up: page cache, the spawner thread
                _ms(confined, command), _ms(free, command)
            for index in range(rounds):
                pair = [("sandboxed", confined), ("unconfined", free)]
                for name, terminal in pair if index % 2 else reversed(pair):
                    times[name].append(_ms(terminal, command))
            print(f"\n{command!r}")
            for name, values in times.items():
                print(f"  {name:>10}: median {statistics.median(values):6.2f} ms, "
                      f"p95 {_p95(values):6.2f} ms")
            extra = [a - b for a, b in zip(times["sandboxed"], times["unconfined"], strict=True)]
            print(f"  {'cost':>10}: median {statistics.median(extra):6.2f} ms, "
                  f"p95 {_p95(extra):6.2f} ms (sandboxed minus unconfined, per round)")
        print(f"\nload at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
