"""Starting a tool's command so that it never outlives mibyan, even on ``kill -9`` or an OOM kill.

Every command starts from one long-lived thread: the kernel's parent-death signal
(``PR_SET_PDEATHSIG``, which bubblewrap's ``--die-with-parent`` uses too) fires when the
*thread* that forked the child ends, so a command started from a short-lived worker thread
would be killed with that thread.

A sandboxed command dies with its sandbox (a PID namespace whose first process has the
parent-death signal). An unconfined one (full access, or no sandbox here) runs under a small
``sh`` watchdog that gets ``SIGTERM`` when mibyan dies and then kills its whole process group;
its group is also written to ``<home>/processes/`` while it runs, and :func:`reap_orphans`
kills the groups whose owner died without cleaning up (run when a session opens in that home).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from effects.logs import get_logger

__all__ = ["ProcessRegistry", "reap_orphans", "spawn", "unconfined_argv"]

log = get_logger(__name__)

_PR_SET_PDEATHSIG = 1
# One thread that lives as long as the process starts every command (see above).
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mibyan-spawn")

# The watchdog: it runs the command in the background of its own process group, waits for it
# (a trap runs during ``wait``, not during a foreground child), and on SIGTERM (mibyan died)
# kills the whole group, itself included. Its exit status is the command's.
_WATCHDOG = 'trap "kill -KILL 0" TERM; /bin/sh -c "$1" & wait $!'


def unconfined_argv(command: str) -> list[str]:
    """``command`` under the watchdog that takes its process group down with mibyan."""
    return ["/bin/sh", "-c", _WATCHDOG, "mibyan-tool", command]


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up on the first command (not when ``mibyan --help`` imports
    this); Linux only: elsewhere the watchdog's trap never fires and the registry is the
    safeguard."""
    if sys.platform != "linux":
        return None
    import ctypes
    return getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


def _die_with(prctl: Callable[..., int] | None, parent: int, sig: int) -> None:
    """In the child, before exec: ``sig`` when the parent dies; if it died already, go."""
    if prctl is None:
        return
    prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def spawn(argv: list[str], *, cwd: Path, stdout: IO[bytes] | int, confined: bool,
          env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session (its own process group, which ``killpg`` ends), with
    ``env`` (None: mibyan's own environment)."""
    parent, prctl = os.getpid(), _prctl()
    # bubblewrap sets its own parent-death signal; the watchdog needs SIGTERM for its trap.
    sig = signal.SIGKILL if confined else signal.SIGTERM

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, cwd=cwd, stdout=stdout, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env,
                                preexec_fn=lambda: _die_with(prctl, parent, sig))
    return _SPAWNER.submit(start).result()


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot): a pid alone may be reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProcessRegistry:
    """The process groups of the unconfined commands this process runs, one small JSON file
    each under ``<home>/processes`` (only ids: no command text, which may hold a secret)."""

    def __init__(self, home: Path) -> None:
        self.folder = home / "processes"

    def add(self, process: subprocess.Popen[bytes]) -> None:
        owner = os.getpid()
        entry = {"owner": owner, "owner_started": _start_time(owner), "pgid": process.pid,
                 "leader_started": _start_time(process.pid)}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._path(process.pid).write_text(json.dumps(entry), encoding="utf-8")
        except OSError as exc:  # the watchdog still ends it with mibyan
            log.warning("process_registry_unwritable", error=str(exc))

    def remove(self, process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            self._path(process.pid).unlink()

    def _path(self, pgid: int) -> Path:
        return self.folder / f"{os.getpid()}-{pgid}.json"


def reap_orphans(home: Path) -> int:
    """Kill the process groups that dead mibyan processes left in ``home``'s registry; the
    number of groups killed."""
    folder = home / "processes"
    try:
        entries = sorted(folder.glob("*.json"))
    except OSError:
        return 0
    killed = 0
    for path in entries:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            owner, pgid = int(entry["owner"]), int(entry["pgid"])
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        if _running(owner, entry.get("owner_started")):
            continue  # its owner still runs, and cleans up itself
        if _ours(pgid, entry.get("leader_started")):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
                log.info("orphan_reaped", pgid=pgid, owner=owner)
        with contextlib.suppress(OSError):
            path.unlink()
    return killed


def _running(pid: int, started: object) -> bool:
    """The process that wrote an entry still runs (the same one, not a reuse of its pid)."""
    if started is not None:
        return _start_time(pid) == started
    try:  # no /proc (not Linux): the pid alone
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ours(pgid: int, leader_started: object) -> bool:
    """The group still exists and is the one recorded: its leader, if alive, started when it
    was written (while a group has members, its id is not given to another process)."""
    if not _group_alive(pgid):
        return False
    started = _start_time(pgid)
    return started is None or started == leader_started
