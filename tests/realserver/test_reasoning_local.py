"""Against llama.cpp's own server with the embedded model, scripted to reason: a grammar makes
every reply ``<think>...</think>`` then the answer (the model writes the tags itself, as open
reasoning models do). Over each of the three APIs, streamed and not, the reasoning lands in its
own field and in ``last_reasoning`` (and the reasoning callback, streamed), never in
``final_response`` or the text deltas; the session replays."""

from __future__ import annotations

import pytest

from effects.local.llama_server import LocalServer
from effects.local.model_file import MODEL_NAME, LocalSettings
from pipeline.agent import Agent
from pipeline.shell.replay import replay

pytestmark = pytest.mark.realserver

KEY = "lane-key"
THOUGHT = "The capital of France is Paris."
GRAMMAR = f'root ::= "<think>{THOUGHT}</think>" "Paris."'
MODES = ["chat_completions", "codex_responses", "anthropic_messages"]
CASES = [pytest.param(mode, stream, id=f"{mode}-{'stream' if stream else 'whole'}")
         for mode in MODES for stream in (False, True)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = LocalServer(tmp_path_factory.mktemp("reasoning"),
                      LocalSettings(n_ctx=1024, grammar=GRAMMAR), api_key=KEY)
    srv._start()
    yield srv
    srv.stop()


@pytest.mark.parametrize(("mode", "stream"), CASES)
def test_think_tags_land_in_the_reasoning_never_in_the_answer(server, tmp_path, mode, stream):
    deltas: list[str] = []
    thoughts: list[str] = []
    with Agent(model=MODEL_NAME, base_url=server.base_url, api_mode=mode, stream=stream,
               home=tmp_path, max_tokens=48, max_retries=1, retry_base_delay=0.01,
               api_key=KEY) as agent:
        result = agent.run_conversation("What is the capital of France?",
                                        stream_callback=deltas.append,
                                        reasoning_callback=thoughts.append)
    assert result["completed"] and not result["failed"], result["error"]
    assert result["final_response"] == "Paris."
    assert result["last_reasoning"] == THOUGHT
    assistant = result["messages"][-1]
    assert assistant["reasoning"] == THOUGHT and "think" not in assistant["content"]
    if stream:
        assert "".join(deltas) == "Paris." and "".join(thoughts) == THOUGHT
    assert replay(tmp_path / "sessions", result["session_id"]).identical
