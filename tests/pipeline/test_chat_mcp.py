"""The chat starts the MCP servers config.toml declares (the real test server, over stdio, in
the session's sandbox), offers their tools under their namespaced names, lists them in
/tools, keeps them across /new, and stops them when it ends, in-process and as ``mibyan
chat``."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

import pytest

from effects.tools.sandbox import probe
from pipeline.chat.display import PlainDisplay
from pipeline.chat.options import ChatOptions
from pipeline.chat.piped import piped
from pipeline.chat.session import ChatSession
from stages.prompt.untrusted import unwrapped
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.test_cli import PROVIDER_VARIABLES, mibyan
from tests.pipeline.test_mcp import SERVER, _cmdline

KEY = "sk-chat-mcp-test-key-0123456789"


@pytest.fixture(autouse=True)
def no_provider_environment(monkeypatch):
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _configured(home: Path) -> str:
    """config.toml with the test server as ``calc`` (``crash`` denied; it writes its PID in
    ``server.pid`` beside ``home``: the sandbox keeps the home from it); the marker in its
    command line finds its processes."""
    home.mkdir()
    marker = f"chat-calc-{os.getpid()}-{time.monotonic_ns()}"
    (home / "config.toml").write_text(
        "[mcp.servers.calc]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(SERVER)}, \"stdio\", \"{marker}\"]\n"
        'deny = ["crash"]\n'
        f"env = {{ MCP_TEST_PIDFILE = {json.dumps(str(home.parent / 'server.pid'))} }}\n")
    return marker


def _running(marker: str) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and marker.encode() in _cmdline(p)]


def _gone(marker: str, within: float = 10.0) -> bool:
    """No process of the server is left, now or soon (an exiting process closes its pipes a
    moment before the kernel marks it dead)."""
    deadline = time.monotonic() + within
    while _running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_chat_offers_config_servers_keeps_them_across_new_and_stops_them(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    marker = _configured(home)
    out, err = io.StringIO(), io.StringIO()
    with FakeOpenAIServer() as server:
        server.script(Reply.tool_calls([("calc__add", '{"a": 5, "b": 6}')]),
                      Reply.text("Eleven."), Reply.text("Hello again."))
        options = ChatOptions(home=home, workdir=tmp_path, model="fake-model",
                              base_url=server.base_url, stream=False,
                              overrides={"api_key": KEY})
        with ChatSession(options, PlainDisplay(out, err)) as session:
            started = _running(marker)
            assert started  # started with the chat, before the first turn
            assert piped(session, ["add 5 and 6\n", "/tools\n", "/new\n", "hello\n"]) == 0
            assert _running(marker) == started  # /new built another agent, same servers
        server.assert_done()
    assert _gone(marker)  # the chat's close stopped them
    # It ran in the session's sandbox (its own PID namespace: one of its first processes).
    assert probe().started is (int((tmp_path / "server.pid").read_text()) < 10)
    offered = [{t["function"]["name"] for t in request["tools"]} for request in server.requests]
    assert "calc__add" in offered[0] and "calc__crash" not in offered[0]
    assert "read_file" in offered[0]  # the built-in tools stay
    assert "calc__add" in offered[2]  # the new session's agent has them too
    results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert unwrapped(results[-1]["content"]) == "11"
    listed = out.getvalue()
    assert "calc__add" in listed and "Add two integers." in listed
    assert "calc__crash" not in listed
    assert "  [tool] calc__add" in err.getvalue()


def test_without_tools_the_chat_starts_no_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    marker = _configured(home)
    options = ChatOptions(home=home, workdir=tmp_path, model="fake-model",
                          base_url="http://127.0.0.1:9/v1", no_tools=True,
                          overrides={"api_key": KEY})
    with ChatSession(options, PlainDisplay(io.StringIO(), io.StringIO())):
        assert not _running(marker)


def test_mibyan_chat_piped_calls_a_config_server_and_leaves_no_process(tmp_path: Path) -> None:
    home = tmp_path / "home"
    marker = _configured(home)
    with FakeOpenAIServer() as server:
        server.script(Reply.tool_calls([("calc__add", '{"a": 20, "b": 22}')]),
                      Reply.text("Forty-two."))
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY}
        done = mibyan(home, "chat", "--model", "fake", "--workdir", str(tmp_path),
                      "--no-stream", stdin="add 20 and 22\n/tools\n", env=env)
        server.assert_done()
    assert done.returncode == 0, done.stderr
    assert "Forty-two." in done.stdout and "calc__add" in done.stdout
    results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert unwrapped(results[-1]["content"]) == "42"
    assert _gone(marker)
