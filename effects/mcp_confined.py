"""MCP stdio servers started as tool commands are: under the session's sandbox (bubblewrap)
where it is on, and never outliving mibyan.

A confined server runs in the sandbox's PID namespace with ``--die-with-parent``, like a
terminal command (``effects.tools.sandbox``). An unconfined one (full access, or no sandbox
here) runs under a small launcher that asks the kernel for ``SIGTERM`` when mibyan dies
(``PR_SET_PDEATHSIG``, Linux) and then kills the server's process group, the launcher's own
(the SDK starts every stdio server in a session of its own). Either way ``McpServers.close``
(the agent's close) stops it, and a ``kill -9`` of mibyan leaves no server behind.
"""

from __future__ import annotations

import sys
from pathlib import Path

import attrs

from effects.mcp_client import McpServerSpec
from effects.tools.sandbox import Sandbox, SandboxPolicy

__all__ = ["LAUNCHER", "confined"]

# Run by the Python running mibyan: the parent-death signal, then the server as its child in
# the launcher's process group; SIGTERM (mibyan died) takes the whole group down.
LAUNCHER = (
    "import ctypes, os, signal, subprocess, sys\n"
    "parent = int(sys.argv[1])\n"
    "signal.signal(signal.SIGTERM, lambda *_: os.killpg(0, signal.SIGKILL))\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)\n"
    "if os.getppid() != parent:\n"
    "    os.killpg(0, signal.SIGKILL)\n"
    "sys.exit(subprocess.Popen(sys.argv[2:]).wait())\n")


def confined(spec: McpServerSpec, policy: SandboxPolicy, root: Path, *, parent: int
             ) -> McpServerSpec:
    """``spec`` as the session starts it: a stdio server's command under ``policy``'s sandbox
    in ``root`` (the working tree; the server's ``cwd`` must be inside it), else under the
    launcher (``parent`` is this process's id); an HTTP server as it is."""
    if spec.command is None:
        return spec
    cwd = Path(spec.cwd) if spec.cwd is not None else root
    argv = Sandbox(policy).exec_argv([spec.command, *spec.args], cwd=cwd, root=root)
    if argv is None:
        if sys.platform != "linux":  # no parent-death signal: the SDK's close is the guard
            return spec
        argv = [sys.executable, "-c", LAUNCHER, str(parent), spec.command, *spec.args]
    return attrs.evolve(spec, command=argv[0], args=tuple(argv[1:]), cwd=str(cwd))
