"""MCP servers as tools, against real servers built with the SDK (tests/pipeline/mcp_server.py):
over stdio (a subprocess) and streamable HTTP (127.0.0.1), through the agent, the tool runner,
the event log, replay and the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from effects.eventlog.store import read_envelopes, session_path
from effects.mcp_client import McpCallError
from effects.tools.sandbox import probe
from pipeline.agent import Agent
from pipeline.config import SECTIONS
from pipeline.mcp_tools import McpServerSpec, mcp_tools, servers_from_config, tool_name
from pipeline.shell.replay import replay
from stages.errors import UsageError
from stages.prompt.untrusted import unwrapped
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.test_cli import mibyan

SERVER = str(Path(__file__).with_name("mcp_server.py"))
KEY = "sk-mcp-test-key-0123456789"


def stdio(name: str = "calc", **kw: object) -> dict[str, object]:
    return {"name": name, "command": sys.executable, "args": [SERVER, "stdio"], **kw}


@contextlib.contextmanager
def http_server() -> Iterator[tuple[str, subprocess.Popen]]:
    """The test server over streamable HTTP on 127.0.0.1: its URL and its process."""
    process = subprocess.Popen([sys.executable, SERVER, "http"], stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", process
    finally:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server() as (url, _):
        yield url


def _tool_ran(home: Path, session_id: str) -> list[dict]:
    return [e.payload["outcome"] for e in read_envelopes(session_path(home / "sessions",
                                                                     session_id))
            if e.kind == "tool_ran"]


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead; only its parent's wait is missing.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


def _gone(pid: int, within: float = 10.0) -> bool:
    """The process ended, now or soon: a process that exits closes its pipes (which is what
    the client notices) a moment before the kernel marks it dead."""
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_tool_names_are_namespaced_and_valid_openai_function_names() -> None:
    assert tool_name("gh", "create_issue") == "gh__create_issue"
    assert tool_name("gh", "a.b/c") == "gh__a_b_c"
    long_a, long_b = tool_name("s", "x" * 80 + "a"), tool_name("s", "x" * 80 + "b")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b


def test_stdio_server_tools_and_schemas_pass_through_and_calls_answer() -> None:
    with mcp_tools(stdio(deny=["crash", "sl*"])) as mcp:
        by_name = {t.name: t for t in mcp}
        assert set(by_name) == {"calc__add", "calc__secret_token", "calc__fail", "calc__pid",
                                "calc__header"}
        schema = json.loads(by_name["calc__add"].spec.parameters)
        assert schema["required"] == ["a", "b"]
        assert schema["properties"]["a"]["type"] == "integer"
        assert by_name["calc__add"].invoke('{"a": 2, "b": 40}') == "42"


def test_allow_list_keeps_only_the_named_tools() -> None:
    with mcp_tools(stdio(allow=["add", "pid"])) as mcp:
        assert [t.name for t in mcp] == ["calc__add", "calc__pid"]


def test_streamable_http_server_with_headers(http_url: str) -> None:
    with mcp_tools({"name": "web", "url": http_url, "headers": {"X-Test": "yes"}},
                   ) as mcp:
        by_name = {t.name: t for t in mcp}
        assert by_name["web__add"].invoke('{"a": 1, "b": 2}') == "3"
        # The header reached the server; its value comes back masked, as every configured
        # header value is (it may be a token), whatever its length.
        assert by_name["web__header"].invoke('{"name": "X-Test"}') == "***"
        assert by_name["web__header"].invoke('{"name": "X-Absent"}') == "<none>"


def test_an_http_server_gone_is_an_error_result_not_a_hang() -> None:
    with http_server() as (url, process), mcp_tools({"name": "web", "url": url}) as mcp:
        add = next(t for t in mcp if t.name == "web__add")
        assert add.invoke('{"a": 1, "b": 1}') == "2"
        process.kill()
        process.wait(timeout=10)
        started = time.monotonic()
        with pytest.raises(McpCallError, match="server 'web'"):
            add.invoke('{"a": 1, "b": 1}')
        assert time.monotonic() - started < 30


def test_a_session_with_mcp_tools_logs_their_results_and_replays_without_the_server(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    with FakeOpenAIServer() as server:
        server.script(Reply.tool_calls([("calc__add", '{"a": 20, "b": 22}'),
                                        ("calc__fail", '{"reason": "no such thing"}')]),
                      Reply.text("It is 42."))
        mcp = mcp_tools(stdio(deny=["crash", "slow"]))
        pid = int(next(t for t in mcp if t.name == "calc__pid").invoke("{}"))
        # The McpTools given as the tools: the agent's close stops the server.
        with Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home,
                   tools=mcp) as agent:
            result = agent.run("what is 20 + 22?")
            session_id = agent.session_id
        server.assert_done()
    assert result.final_response == "It is 42."
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"calc__add", "calc__fail"} <= offered
    added, failed = _tool_ran(home, session_id)
    assert added["ok"] and added["content"] == "42"
    assert not failed["ok"] and "no such thing" in failed["content"]
    assert _gone(pid)  # closed with the agent, no orphan
    assert session_id is not None
    assert replay(home / "sessions", session_id).identical


def test_a_slow_tool_times_out_as_an_error_the_model_reads_and_the_server_goes_on(
        tmp_path: Path) -> None:
    with mcp_tools(stdio(timeout=1)) as mcp:
        by_name = {t.name: t for t in mcp}
        with FakeOpenAIServer() as server:
            server.script(Reply.tool_calls([("calc__slow", '{"seconds": 30}')]),
                          Reply.tool_calls([("calc__add", '{"a": 1, "b": 1}')]),
                          Reply.text("done"))
            with Agent(model="fake-model", base_url=server.base_url, api_key=KEY,
                       home=tmp_path / "home", tools=list(by_name.values())) as agent:
                started = time.monotonic()
                result = agent.run("be slow")
                session_id = agent.session_id
            server.assert_done()
        assert time.monotonic() - started < 20
        assert result.completed and result.final_response == "done"
        slow, added = _tool_ran(tmp_path / "home", str(session_id))
        assert not slow["ok"] and "did not answer within 1s" in slow["content"]
        assert added["ok"] and added["content"] == "2"


def test_an_interrupt_stops_waiting_for_a_slow_call(tmp_path: Path) -> None:
    with mcp_tools(stdio(timeout=60)) as mcp, FakeOpenAIServer() as server:
        server.script(Reply.tool_calls([("calc__slow", '{"seconds": 30}')]))
        with Agent(model="fake-model", base_url=server.base_url, api_key=KEY,
                   home=tmp_path / "home", tools=list(mcp)) as agent:
            threading.Timer(1.0, agent.interrupt).start()
            started = time.monotonic()
            result = agent.run("be slow")
            session_id = agent.session_id
        server.assert_done()
    assert time.monotonic() - started < 20
    assert not result.completed
    [slow] = _tool_ran(tmp_path / "home", str(session_id))
    assert not slow["ok"] and "interrupted" in slow["content"]


def test_a_crashed_server_is_an_error_result_then_starts_again() -> None:
    with mcp_tools(stdio()) as mcp:
        by_name = {t.name: t for t in mcp}
        first = int(by_name["calc__pid"].invoke("{}"))
        with pytest.raises(McpCallError, match="calc"):
            by_name["calc__crash"].invoke("{}")
        assert _gone(first)
        second = int(by_name["calc__pid"].invoke("{}"))
        assert second != first


def test_a_crash_inside_a_turn_does_not_end_the_turn(tmp_path: Path) -> None:
    with mcp_tools(stdio()) as mcp, FakeOpenAIServer() as server:
        server.script(Reply.tool_calls([("calc__crash", "{}")]),
                      Reply.tool_calls([("calc__add", '{"a": 2, "b": 2}')]),
                      Reply.text("recovered"))
        with Agent(model="fake-model", base_url=server.base_url, api_key=KEY,
                   home=tmp_path / "home", tools=list(mcp)) as agent:
            result = agent.run("crash it")
            session_id = agent.session_id
        server.assert_done()
    assert result.final_response == "recovered"
    crashed, added = _tool_ran(tmp_path / "home", str(session_id))
    assert not crashed["ok"] and "calc" in crashed["content"]
    assert added["ok"] and added["content"] == "4"


def test_environment_references_are_read_and_their_values_redacted() -> None:
    secret = "tok-" + "s3cr3t" * 4
    with mcp_tools(stdio(env={"TEST_TOKEN": "${MCP_TEST_TOKEN}"}),
                   env={"MCP_TEST_TOKEN": secret}) as mcp:
        answer = next(t for t in mcp if t.name == "calc__secret_token").invoke("{}")
    assert isinstance(answer, str) and answer.startswith("token is ")
    assert secret not in answer
    with pytest.raises(UsageError, match="MCP_TEST_MISSING"):
        mcp_tools(stdio(env={"T": "${MCP_TEST_MISSING}"}), env={})


def test_a_server_that_cannot_start_is_a_usage_error_naming_it() -> None:
    started = time.monotonic()
    with pytest.raises(UsageError, match="server 'broken' could not start"):
        mcp_tools({"name": "broken", "command": sys.executable, "args": ["-c", "pass"],
                   "startup_timeout": 120})
    assert time.monotonic() - started < 60  # told when it exits, not at the timeout


def test_config_declares_servers_and_its_section_is_known() -> None:
    assert "mcp" in SECTIONS
    specs = servers_from_config({"mcp": {"servers": {
        "a": {"command": "python", "args": ["s.py"], "deny": ["x"]},
        "b": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer t"}}}}})
    assert [s.name for s in specs] == ["a", "b"]
    assert specs[0].args == ("s.py",) and not specs[0].offers("x") and specs[0].offers("y")
    assert specs[1].redacted == ("Bearer t",)
    for bad in ({"mcp": {"servers": {"a": {"command": "x", "url": "y"}}}},
                {"mcp": {"servers": {"a": {"comand": "x"}}}},
                {"mcp": {"servers": {"a__b": {"command": "x"}}}},
                {"mcp": {"servers": {"a": {"command": "x", "args": "s.py"}}}}):
        with pytest.raises(UsageError):
            servers_from_config(bad)
    assert McpServerSpec(name="x", command="y").offers("anything")


def test_mibyan_run_calls_a_server_declared_in_config(tmp_path: Path) -> None:
    home, pid_file = tmp_path / "home", tmp_path / "server.pid"
    home.mkdir()
    marker = f"calc-{os.getpid()}-{time.monotonic_ns()}"  # in the server's command line
    (home / "config.toml").write_text(
        "[mcp.servers.calc]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(SERVER)}, \"stdio\", \"{marker}\"]\n"
        'deny = ["crash"]\n'
        f"env = {{ MCP_TEST_PIDFILE = {json.dumps(str(pid_file))} }}\n")
    with FakeOpenAIServer() as server:
        server.script(Reply.tool_calls([("calc__add", '{"a": 5, "b": 6}')]),
                      Reply.text("Eleven."))
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY}
        done = mibyan(home, "run", "--model", "fake", "--workdir", str(tmp_path),
                      "--no-stream", "add 5 and 6", env=env)
        server.assert_done()
    assert done.returncode == 0, done.stderr
    assert "unknown section" not in done.stderr
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert "calc__add" in offered and "calc__crash" not in offered
    assert "read_file" in offered  # the built-in tools stay
    results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert unwrapped(results[-1]["content"]) == "11"  # marked as data (rules 7)
    assert "Eleven." in done.stdout
    # It ran in the session's sandbox (its own PID namespace: one of its first processes)...
    assert probe().started is (int(pid_file.read_text()) < 10)
    # ... and went with the CLI.
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit()
                and marker.encode() in _cmdline(p)]
