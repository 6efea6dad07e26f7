"""Start-up of the terminal chat: ``mibyan chat`` in a real terminal (tmux), from the launch
to its banner on the screen (the prompt is up), against a fake OpenAI server on loopback. Not
part of the test suite; it asserts nothing about speed.

    python bench/chat_start.py                   # median of 7 starts
    python bench/chat_start.py --root /work/main # the same, for another checkout's code
    python bench/chat_start.py --compare /work/main  # alternate with another checkout

Alternating spreads the noise of a shared machine over both checkouts alike.

Each start is a fresh process in a fresh home; the time includes the interpreter's start, the
imports of prompt_toolkit and rich, the first agent and the first screen.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fake_openai import FakeOpenAIServer  # noqa: E402

BANNER = "/help lists the commands"


def _tmux(socket: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", *args],
                          capture_output=True, text=True, timeout=30, check=False)


def one_start(root: Path, base_url: str, scratch: Path) -> float:
    socket = f"mibyan-bench-{uuid.uuid4().hex[:12]}"
    home = scratch / uuid.uuid4().hex[:8]
    env = {"MIBYAN_HOME": str(home), "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-bench",
           "MIBYAN_MODEL": "gpt-4o-mini", "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    script = scratch / f"{socket}.sh"
    script.write_text("\n".join(
        ["#!/bin/sh", f"cd {shlex.quote(str(root))}",
         *[f"export {k}={shlex.quote(v)}" for k, v in env.items()],
         shlex.join([sys.executable, "-m", "pipeline.cli.main", "chat"]), "sleep 600"]) + "\n")
    started = time.perf_counter()
    _tmux(socket, "new-session", "-d", "-s", "b", "-x", "110", "-y", "40", "sh", str(script))
    try:
        while BANNER not in _tmux(socket, "capture-pane", "-p", "-t", "b").stdout:
            if time.perf_counter() - started > 60:
                raise SystemExit("the chat did not start within 60 s")
            time.sleep(0.01)
        return time.perf_counter() - started
    finally:
        _tmux(socket, "kill-server")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to start")
    parser.add_argument("--compare", type=Path, help="another checkout, started in turn")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("needs tmux")
    roots = [args.root] + ([args.compare] if args.compare else [])
    times: dict[Path, list[float]] = {root: [] for root in roots}
    with FakeOpenAIServer() as server, tempfile.TemporaryDirectory() as scratch:
        for root in roots:
            one_start(root, server.base_url, Path(scratch))  # warm the file cache
        for _ in range(args.runs):
            for root in roots:
                times[root].append(one_start(root, server.base_url, Path(scratch)))
    for root, seconds in times.items():
        print(f"mibyan chat start ({root}): median {statistics.median(seconds):.3f} s, "
              f"min {min(seconds):.3f} s, max {max(seconds):.3f} s over {args.runs} runs")


if __name__ == "__main__":
    main()
