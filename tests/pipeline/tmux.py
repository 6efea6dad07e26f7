"""Drive a program in a real terminal: tmux on a socket of its own, keys sent with
``send-keys``, the screen read with ``capture-pane`` and polled until what is expected shows
(never a fixed sleep). Timeouts are generous: the machine may be loaded."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLL_SECONDS = 0.1
DEFAULT_TIMEOUT = 90.0
EXITED = "[exited "


class Tmux:
    def __init__(self, scratch: Path, *, width: int = 110, height: int = 45) -> None:
        self.scratch = scratch
        self.socket = f"mibyan-test-{uuid.uuid4().hex[:12]}"
        self.width, self.height = width, height
        self.runs = 0

    def tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args],
                              capture_output=True, text=True, timeout=30, check=False)

    def start(self, args: Iterable[str], env: Mapping[str, str],
              unset: Iterable[str] = ()) -> None:
        """Run ``python -m pipeline.cli.main ARGS`` in a new session (ending the previous one); its
        exit status shows as ``[exited N]``."""
        self.tmux("kill-session", "-t", "chat")
        self.runs += 1
        script = self.scratch / f"run-{self.runs}.sh"
        # The shell outlives the Ctrl-C sent to the program (a trap, not an ignored signal:
        # the program keeps the default disposition), so it can tell the exit status.
        lines = ["#!/bin/sh", "trap : INT", f"cd {shlex.quote(str(ROOT))}"]
        lines += [f"unset {name}" for name in unset]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
        command = shlex.join([sys.executable, "-m", "pipeline.cli.main", *args])
        # The program's stderr goes to a file, for the report of a failing wait.
        self.stderr = self.scratch / f"stderr-{self.runs}.txt"
        lines += [f"{command} 2>{shlex.quote(str(self.stderr))}", f'echo "{EXITED}$?]"',
                  "sleep 600"]
        script.write_text("\n".join(lines) + "\n")
        done = self.tmux("new-session", "-d", "-s", "chat", "-x", str(self.width), "-y",
                         str(self.height), "sh", str(script))
        assert done.returncode == 0, done.stderr
        self.socket_path = self.tmux("display", "-p", "#{socket_path}").stdout.strip()

    def screen(self) -> str:
        """The pane with its scrollback, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-t", "chat", "-S", "-2000").stdout

    def wait_for(self, text: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not show in {timeout:g} s; the screen:\n"
                                     f"{screen}\nstderr:\n{self.errors()}")
            time.sleep(POLL_SECONDS)

    def errors(self) -> str:
        try:
            return self.stderr.read_text()
        except (AttributeError, OSError):
            return ""

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "chat", "-l", text)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "chat", *keys)

    def wait_prompt(self, prompt: str = ">", timeout: float = DEFAULT_TIMEOUT) -> str:
        """Until the last line shown is an empty ``prompt``: the program reads again (keys
        typed before that would reach the terminal, not the program)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            shown = [line for line in screen.splitlines() if line.strip()]
            if shown and shown[-1].strip() == prompt.strip():
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"no empty prompt {prompt!r} in {timeout:g} s; the "
                                     f"screen:\n{screen}")
            time.sleep(POLL_SECONDS)

    def line(self, text: str, prompt: str = ">") -> None:
        """Type ``text`` and Enter at the (empty) prompt."""
        self.wait_prompt(prompt)
        self.type(text)
        self.keys("Enter")

    def close(self) -> None:
        """End the server and its programs, and remove its socket (tmux leaves it behind)."""
        self.tmux("kill-server")
        if getattr(self, "socket_path", ""):
            Path(self.socket_path).unlink(missing_ok=True)


def base_environment(home: Path) -> dict[str, str]:
    return {"MIBYAN_HOME": str(home), "PATH": os.environ.get("PATH", ""),
            "TERM": "xterm-256color", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
