"""kill -9 of mibyan while a terminal tool runs leaves no process behind, tried from outside.

A separate Python process runs an ``Agent`` (a scripted model) whose terminal call starts
``sleep`` with a unique duration (its marker, in every argv of the command's processes); the
test waits for the marker to show in /proc, kills the agent's process with SIGKILL and checks
that every process carrying the marker is gone. Sandboxed (bubblewrap's PID namespace and
die-with-parent) and unconfined (full access: the watchdog and the process registry), in the
foreground and with ``background=true``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from effects.tools.processes import reap_orphans

pytestmark = pytest.mark.subprocess

REPO = Path(__file__).resolve().parents[2]

_DRIVER = textwrap.dedent("""
    import sys, time
    from pipeline.agent import Agent
    from pipeline.testing import ScriptedModel, tool_calls
    from pipeline.toolsets import builtin_tools

    work, home, mode, command, background = sys.argv[1:6]
    call = {"command": command, "background": background == "1"}
    agent = Agent(client=ScriptedModel(tool_calls(("terminal", call)), "started"),
                  tools=builtin_tools(work, toolsets=("terminal",)), home=home, sandbox=mode)
    agent.run("start it")
    print("ran", flush=True)
    time.sleep(600)
""")


def _carrying(marker: str) -> list[int]:
    """The processes whose command line holds ``marker`` (not this test's own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _until(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _start(tmp_path: Path, mode: str, background: bool) -> tuple[subprocess.Popen, str]:
    marker = f"1000.{random.randrange(10**8, 10**9)}"
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    # A grandchild in the background and one in the foreground: the whole tree must go.
    command = f"sleep {marker} & sleep {marker}"
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(work), str(home), mode, command,
         "1" if background else "0"], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env={**os.environ, "MIBYAN_HOME": str(home)})
    return driver, marker


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
@pytest.mark.parametrize("mode", ["workspace-write", "full-access"])
def test_kill_9_during_a_terminal_tool_leaves_no_process(tmp_path, mode, background) -> None:
    driver, marker = _start(tmp_path, mode, background)
    try:
        # Both sleeps run (and, in the background case, the turn went on past the tool).
        assert _until(lambda: len([p for p in _carrying(marker)
                                   if _name(p) == "sleep"]) == 2, 60), "the command never ran"
        if background:
            assert driver.stdout is not None and driver.stdout.readline() == b"ran\n"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(10)
        left = _until(lambda: not _carrying(marker), 10)
        assert left, f"left behind: {[(p, _name(p)) for p in _carrying(marker)]}"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid in _carrying(marker):  # only what this test started
            os.kill(pid, signal.SIGKILL)


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_a_registered_group_whose_owner_died_is_reaped(tmp_path) -> None:
    """The registry's second line of defence: a group that outlived its owner (here one
    started without the watchdog, as an OOM kill of the watchdog would leave it) is killed
    when a session opens in the same home."""
    marker = f"1000.{random.randrange(10**8, 10**9)}"
    home = tmp_path / "home"
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys
        from pathlib import Path
        from effects.tools.processes import ProcessRegistry
        p = subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
        ProcessRegistry(Path(sys.argv[1])).add(p)
        print("registered", flush=True)
        import time; time.sleep(600)
    """), str(home)], cwd=REPO, stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None and owner.stdout.readline() == b"registered\n"
        assert reap_orphans(home) == 0  # its owner lives: nothing to reap
        assert _carrying(marker)
        owner.kill()
        owner.wait()
        assert _carrying(marker), "the group outlived its owner"
        assert reap_orphans(home) == 1
        assert _until(lambda: not _carrying(marker), 5)
        assert list((home / "processes").iterdir()) == []
        assert reap_orphans(home) == 0
    finally:
        owner.kill()
        for pid in _carrying(marker):
            os.kill(pid, signal.SIGKILL)
