"""MCP servers for the gateway's agents (``[mcp.servers.NAME]`` in config.toml), against the
real test server over stdio: each session starts its own, under the session's sandbox
(bubblewrap: its own PID namespace, the working tree its only writable place), stops it when
the session closes, and a ``kill -9`` of its process leaves no server behind."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from effects.tools.sandbox import probe
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import start_gateway

SERVER = str(Path(__file__).parents[1] / "mcp_server.py")
REPO = Path(__file__).resolve().parents[3]
needs_sandbox = pytest.mark.skipif(not probe().started, reason="no bubblewrap sandbox here")


def _carrying(marker: str) -> list[int]:
    """The processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
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


def _config(home: Path, marker: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(textwrap.dedent(f"""
        [mcp.servers.probe]
        command = {json.dumps(sys.executable)}
        args = [{json.dumps(SERVER)}, "stdio", "{marker}"]
    """))


@pytest.mark.parametrize("mode", [pytest.param("workspace-write", marks=needs_sandbox),
                                  "full-access"])
def test_a_gateway_session_runs_its_own_mcp_server_under_its_sandbox(upstream, tmp_path,
                                                                     mode):
    marker = f"mcp-{random.randrange(10**8, 10**9)}"
    workdir, home = tmp_path / "work", tmp_path / "home"
    workdir.mkdir()
    _config(home, marker)
    upstream.script(Reply.tool_calls([("probe__pid", "{}")]), Reply.text("done"))
    for gateway in start_gateway(upstream, home, workdir, sandbox=mode):
        with gateway.client() as client:
            answer = client.post("/v1/chat/completions", json={
                "model": "mibyan", "messages": [{"role": "user", "content": "pid?"}]})
            assert answer.status_code == 200, answer.text
            session = answer.headers["x-mibyan-session-id"]
            assert _carrying(marker), "the session's server is not running"
            sent = upstream.requests[1]["messages"][-1]["content"]
            pid = int(sent.split("\n")[1]) if "\n" in sent else int(sent)
            # In the sandbox's PID namespace the server is one of its first processes.
            assert (pid < 10) is (mode == "workspace-write")
            assert client.delete(f"/v1/sessions/{session}").status_code == 200
        assert _until(lambda: not _carrying(marker), 15), "the server outlived its session"
        assert gateway.assert_every_session_replays() == 1


_DRIVER = textwrap.dedent("""
    import sys
    from effects.tools.sandbox import SandboxPolicy
    from pipeline.mcp_tools import mcp_tools
    work, mode, server, marker = sys.argv[1:5]
    tools = mcp_tools({"name": "probe", "command": sys.executable,
                       "args": [server, "stdio", marker]},
                      sandbox=SandboxPolicy(mode=mode), root=work)
    # A call the server is busy with: it would not notice its stdin closing for minutes.
    slow = next(t for t in tools if t.name == "probe__slow")
    import threading, time
    threading.Thread(target=slow.invoke, args=({"seconds": 300},), daemon=True).start()
    time.sleep(1)
    print(len(tools), flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("mode", [pytest.param("workspace-write", marks=needs_sandbox),
                                  "full-access"])
def test_kill_9_leaves_no_mcp_server_behind(tmp_path, mode):
    marker = f"mcp-{random.randrange(10**8, 10**9)}"
    work = tmp_path / "work"
    work.mkdir()
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(work), mode, SERVER, marker],
                              cwd=REPO, stdout=subprocess.PIPE)
    try:
        assert driver.stdout is not None and int(driver.stdout.readline()) > 0
        assert _carrying(marker)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(10)
        assert _until(lambda: not _carrying(marker), 10), \
            f"left behind: {_carrying(marker)}"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid in _carrying(marker):  # only what this test started
            os.kill(pid, signal.SIGKILL)
