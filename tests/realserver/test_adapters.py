"""mibyan's three adapters (chat completions, Responses, Anthropic Messages; streamed and not)
against llama.cpp's own server, which serves all three from one process, with the embedded model.

Each case runs a turn through the public ``Agent`` and checks what a user relies on: no
exception escapes ``run_conversation``; a failure ends the turn with ``failed=True`` and a clear
error; the session log replays identically; the session resumes and answers the next message.
One server per module (``n_ctx`` small, so a long message overflows it; an API key, so a wrong
one gets a real 401); replies are short (``max_tokens``) to keep the lane quick on 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from effects.local.llama_server import LocalServer
from effects.local.model_file import MODEL_NAME, LocalSettings
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.tools import tool

pytestmark = pytest.mark.realserver

N_CTX = 1024
KEY = "lane-key"
MODES = ["chat_completions", "codex_responses", "anthropic_messages"]
CASES = [pytest.param(mode, stream, id=f"{mode}-{'stream' if stream else 'whole'}")
         for mode in MODES for stream in (False, True)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("realserver")
    srv = LocalServer(home, LocalSettings(n_ctx=N_CTX), api_key=KEY)
    srv._start()
    yield srv
    srv.stop()


def agent(server: LocalServer, home: Path, mode: str, stream: bool, **kw) -> Agent:
    settings = {"max_tokens": 24, "max_retries": 1, "retry_base_delay": 0.01,
                "api_key": KEY, **kw}
    return Agent(model=MODEL_NAME, base_url=server.base_url, api_mode=mode, stream=stream,
                 home=home, **settings)


def is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def events(home: Path, sid: str) -> list:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", sid))]


def assert_replays_and_resumes(server: LocalServer, home: Path, mode: str, stream: bool,
                               sid: str) -> None:
    """The log replays; the resumed session answers. Under rules 3 a history that alone
    overflows the window is compressed first, and a reply cut at ``max_tokens`` is continued
    (up to three times): the answer need not be complete, the turn must not fail."""
    report = replay(home / "sessions", sid)
    assert report.identical, report.divergence
    with agent(server, home, mode, stream, session_id=sid) as again:
        after = again.run_conversation("What is the capital of France?")
    assert not after["failed"], after["error"]
    assert after["final_response"]
    assert replay(home / "sessions", sid).identical
    assert replay(home / "sessions", after["session_id"]).identical


@pytest.mark.parametrize(("mode", "stream"), CASES)
def test_a_plain_answer(server, tmp_path, mode, stream):
    deltas: list[str] = []
    with agent(server, tmp_path, mode, stream) as a:
        result = a.run_conversation("What is the capital of France?",
                                    stream_callback=deltas.append)
    assert result["completed"] and not result["failed"], result["error"]
    assert "Paris" in result["final_response"]
    assert result["usage"]["input_tokens"] > 0 and result["usage"]["output_tokens"] > 0
    if stream:
        assert "".join(deltas) == result["final_response"]
    assert_replays_and_resumes(server, tmp_path, mode, stream, result["session_id"])


def listing_tool(seen: list[str]):
    # ``path`` has a default, so a call whose arguments were cut to ``{}`` would run: only
    # refusing the cut-off call keeps it from running.
    @tool(read_only=True)
    def list_directory(path: str = ".") -> str:
        """List the files in a directory.

        Args:
            path: The directory.
        """
        seen.append(path)
        return "README.md\nsetup.py"

    return list_directory


@pytest.mark.parametrize(("mode", "stream"), CASES)
def test_a_forced_tool_turn(server, tmp_path, mode, stream):
    seen: list[str] = []
    with agent(server, tmp_path, mode, stream, tools=[listing_tool(seen)],
               tool_choice="required", max_turns=1, max_tokens=48) as a:
        result = a.run_conversation("What files are in this directory?")
    assert len(seen) == 1 and isinstance(seen[0], str)
    tool_messages = [m for m in result["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "README.md\nsetup.py"
    assert result["turn_exit_reason"] == "max_iterations_reached(1/1)"
    assert not result["failed"], result["error"]
    assert_replays_and_resumes(server, tmp_path, mode, stream, result["session_id"])


@pytest.mark.parametrize(("mode", "stream"), CASES)
def test_a_tool_call_cut_off_by_max_tokens(server, tmp_path, mode, stream):
    seen: list[str] = []
    # The grammar forces '<tool_call>\n{"name": "list_directory", "arguments": {' (13 tokens):
    # 16 tokens cut the call inside its arguments, as the server then reports it ('{').
    with agent(server, tmp_path, mode, stream, tools=[listing_tool(seen)],
               tool_choice="required", max_turns=2, max_tokens=16) as a:
        result = a.run_conversation("What files are in this directory?")
    first = next(e for e in events(tmp_path, result["session_id"]) if e.kind == "model_replied")
    # The call was cut: the reply says so, or (Responses) only its arguments show it.
    assert first.finish_reason == "length" or not all(
        is_json_object(call.arguments) for call in first.message.tool_calls)
    assert seen == []  # a cut-off call never runs, whatever the server made of its arguments
    assert result["turn_exit_reason"]
    assert result["error"] if result["failed"] else True
    # The next turn of the session sends the refused call back: it must still be valid JSON.
    assert_replays_and_resumes(server, tmp_path, mode, stream, result["session_id"])


@pytest.mark.parametrize(("mode", "stream"), CASES)
def test_an_http_error_ends_the_turn_clearly(server, tmp_path, mode, stream):
    with agent(server, tmp_path, mode, stream, api_key="wrong-key") as a:
        result = a.run_conversation("What is the capital of France?")
    assert result["failed"] and not result["completed"]
    assert "401" in result["error"] or "auth" in result["error"].lower()
    [failure, *_] = [e for e in events(tmp_path, result["session_id"])
                     if e.kind == "model_failed"]
    assert failure.status == 401
    assert "wrong-key" not in repr(events(tmp_path, result["session_id"]))
    assert_replays_and_resumes(server, tmp_path, mode, stream, result["session_id"])


@pytest.mark.parametrize(("mode", "stream"), CASES)
def test_a_context_overflow_ends_the_turn_clearly(server, tmp_path, mode, stream):
    with agent(server, tmp_path, mode, stream) as a:
        result = a.run_conversation("word " * (N_CTX + 200))
    assert result["failed"] and not result["completed"]
    assert "context" in result["error"].lower()
    [failure, *_] = [e for e in events(tmp_path, result["session_id"])
                     if e.kind == "model_failed"]
    assert failure.status == 400
    assert_replays_and_resumes(server, tmp_path, mode, stream, result["session_id"])
