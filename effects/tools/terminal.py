"""The ``terminal`` and ``process`` tools: shell commands in the working tree.

A foreground command runs to its end or its timeout (its whole process group is killed then);
the model gets the exit code and the combined output, cut in the middle when long. An
interrupt of the agent kills a running command too. A background
command returns at once with an id; ``process`` lists such commands, shows their output so far,
and kills them. Whether a command is dangerous is decided before it gets here (the tool plan
asks for approval).

Every command runs in the OS sandbox of the session's policy (``effects.tools.sandbox``), or,
unconfined, under a watchdog that takes it down with mibyan (``effects.tools.processes``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

import attrs

from effects.tools.executor import RUNNING_INTERRUPT
from effects.tools.processes import ProcessRegistry, spawn, unconfined_argv
from effects.tools.sandbox import Probe, Sandbox, SandboxPolicy, probe
from effects.tools.workspace import ToolError, Workspace, cap_middle

__all__ = ["DEFAULT_TIMEOUT", "MAX_OUTPUT_CHARS", "Terminal"]

DEFAULT_TIMEOUT = 180
MAX_TIMEOUT = 3600
MAX_OUTPUT_CHARS = 50_000
_SLICE = 0.1


@attrs.define
class _Background:
    command: str
    process: subprocess.Popen[bytes]
    output: Path


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _run(process: subprocess.Popen[bytes], timeout: float) -> tuple[str | None, bytes]:
    """The command's output, read in short slices (retrying ``communicate`` loses nothing);
    its process group is killed when the batch is interrupted ("interrupted") or the timeout
    passes ("timed_out"); None when it ended by itself."""
    interrupt = RUNNING_INTERRUPT.get()
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            out, _ = process.communicate(timeout=max(0.0, min(_SLICE, left)))
            return None, out
        except subprocess.TimeoutExpired:
            pass
        stopped = "interrupted" if interrupt is not None and interrupt.is_set() else \
            "timed_out" if left <= _SLICE else None
        if stopped is not None:
            _kill_group(process)
            return stopped, process.communicate()[0]


class Terminal:
    """Runs commands for one session; background processes are killed by :meth:`close`."""

    def __init__(self, workspace: Workspace, *, max_output: int = MAX_OUTPUT_CHARS,
                 sandbox: Sandbox | None = None) -> None:
        self.workspace = workspace
        self.max_output = max_output
        # Confined by default; a session hands its own policy over when it opens (``confine``).
        self.sandbox = sandbox or Sandbox()
        self._registry: ProcessRegistry | None = None
        self._background: dict[str, _Background] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        # Background commands' output, made at the first one: an agent that starts none leaves
        # nothing in the temporary directory. Removed at ``close`` (or, never closed, when the
        # terminal is collected): output may hold what a secret scanner would mask.
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    def terminal(self, command: str, timeout: int = DEFAULT_TIMEOUT, workdir: str | None = None,
                 background: bool = False) -> dict[str, object]:
        """Run a shell command and return its exit code and output (stdout and stderr).

        Args:
            command: The command, run by /bin/sh.
            timeout: Seconds to wait before the command is killed (foreground only).
            workdir: The directory to run in, relative to the working directory.
            background: Start it and return at once with a process id (for servers, watchers);
                see its output and stop it with the process tool.
        """
        if not command.strip():
            raise ToolError("command is empty")
        if not 1 <= timeout <= MAX_TIMEOUT:
            raise ToolError(f"timeout must be between 1 and {MAX_TIMEOUT} seconds")
        cwd = self.workspace.resolve(workdir) if workdir else self.workspace.root
        if not cwd.is_dir():
            raise ToolError(f"workdir {workdir!r} is not a directory")
        if background:
            return self._start(command, cwd)
        process = self._spawn(command, cwd, subprocess.PIPE)
        try:
            stopped, out = _run(process, timeout)
        finally:
            self._forget(process)
        if stopped == "interrupted":
            return {"exit_code": None, "interrupted": True, "output": self._text(out),
                    "error": "the user interrupted the command; it was killed"}
        if stopped == "timed_out":
            return {"exit_code": None, "timed_out": True, "output": self._text(out),
                    "error": f"the command did not finish in {timeout} s and was killed"}
        return {"exit_code": process.returncode, "output": self._text(out)}

    def process(self, action: str = "list", process_id: str | None = None) -> dict[str, object]:
        """See or stop commands started with background=true.

        Args:
            action: "list" (all of them), "output" (a process's output so far and whether it
                still runs) or "kill" (stop it and its children).
            process_id: The id terminal returned, for "output" and "kill".
        """
        if action == "list":
            with self._lock:
                items = list(self._background.items())
            return {"processes": [{"process_id": pid, "command": bg.command,
                                   "running": bg.process.poll() is None,
                                   "exit_code": bg.process.poll()} for pid, bg in items]}
        if action not in ("output", "kill"):
            raise ToolError(f"action must be 'list', 'output' or 'kill', got {action!r}")
        found = self._background.get(process_id or "")
        if found is None:
            raise ToolError(f"no background process {process_id!r}; "
                            "action 'list' shows the ones there are")
        if action == "kill":
            _kill_group(found.process)
            found.process.wait()
            self._forget(found.process)
        output = self._text(found.output.read_bytes())
        return {"process_id": process_id, "running": found.process.poll() is None,
                "exit_code": found.process.poll(), "output": output}

    def close(self) -> None:
        """Kill every background process still running."""
        with self._lock:
            running = list(self._background.values())
            self._background.clear()
            scratch, self._scratch = self._scratch, None
        for bg in running:
            if bg.process.poll() is None:
                _kill_group(bg.process)
                bg.process.wait()
            self._forget(bg.process)
        if scratch is not None:
            scratch.cleanup()

    def confine(self, policy: SandboxPolicy) -> Probe:
        """Take up a session's policy; whether its sandbox starts here (probed once per
        process). Unconfined commands are then registered in the policy's home."""
        self.sandbox = Sandbox(policy)
        self._registry = ProcessRegistry(policy.home) if policy.home is not None else None
        return probe() if policy.confining else Probe(False, "full access")

    def _spawn(self, command: str, cwd: Path, stdout: IO[bytes] | int
               ) -> subprocess.Popen[bytes]:
        argv = self.sandbox.argv(command, cwd=cwd, root=self.workspace.root)
        env = self.sandbox.environment()
        if argv is not None:
            return spawn(argv, cwd=cwd, stdout=stdout, confined=True, env=env)
        process = spawn(unconfined_argv(command), cwd=cwd, stdout=stdout, confined=False,
                        env=env)
        if self._registry is not None:
            self._registry.add(process)
        return process

    def _forget(self, process: subprocess.Popen[bytes]) -> None:
        if self._registry is not None:
            self._registry.remove(process)

    def _start(self, command: str, cwd: Path) -> dict[str, object]:
        with self._lock:
            process_id = f"bg{next(self._ids)}"
            if self._scratch is None:
                self._scratch = tempfile.TemporaryDirectory(prefix="mibyan-bg-")
            output = Path(self._scratch.name) / f"{process_id}.log"
            with output.open("wb") as sink:
                process = self._spawn(command, cwd, sink)
            self._background[process_id] = _Background(command, process, output)
        return {"process_id": process_id, "started": True}

    def _text(self, data: bytes) -> str:
        return cap_middle(data.decode("utf-8", errors="replace"), self.max_output)
