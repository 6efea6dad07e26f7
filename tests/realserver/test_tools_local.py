"""An end-to-end coding step with the real local model: its forced tool call reaches the
built-in file tools, which act on real files in a temporary working tree; the session replays."""

from __future__ import annotations

import json

import pytest

from effects.local.llama_server import LocalServer
from effects.local.model_file import MODEL_NAME, LocalSettings
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.toolsets import builtin_tools

pytestmark = pytest.mark.realserver

KEY = "lane-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = LocalServer(tmp_path_factory.mktemp("tools-lane"), LocalSettings(n_ctx=2048),
                      api_key=KEY)
    srv._start()
    yield srv
    srv.stop()


def test_the_local_model_reads_a_real_file_through_read_file(server, tmp_path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the answer is 42\n")
    tools = builtin_tools(work, toolsets=("files",))
    with Agent(model=MODEL_NAME, base_url=server.base_url, api_key=KEY, home=tmp_path / "home",
               tools=tools, tool_choice="required", max_turns=1, max_tokens=128,
               max_retries=1, retry_base_delay=0.01) as agent:
        result = agent.run_conversation("Read the file notes.txt and tell me the answer.")
    [call] = [c for m in result["messages"] if m["role"] == "assistant"
              for c in m.get("tool_calls") or ()]
    assert call["function"]["name"] == "read_file"
    [answer] = [m["content"] for m in result["messages"] if m["role"] == "tool"]
    # The 135M model may ask for odd lines or another path: then the real tool says why not.
    assert answer == "1|the answer is 42" or json.loads(answer)["error"].startswith(
        "ToolError: ")
    assert result["turn_exit_reason"] == "max_iterations_reached(1/1)"
    assert replay(tmp_path / "home" / "sessions", result["session_id"]).identical
