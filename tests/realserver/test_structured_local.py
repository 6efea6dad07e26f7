"""Structured output against llama.cpp's own server with the embedded model: the JSON schema
of ``output_type`` reaches the server as ``response_format`` (chat completions), which llama.cpp
turns into a grammar, or as the one tool an Anthropic Messages request forces (llama.cpp
constrains the call's arguments the same way), so even a small model's answer parses and
validates at once; the session replays. (llama.cpp's Responses endpoint ignores ``text.format``
in the pinned build: not tested here.)
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from effects.local.llama_server import LocalServer
from effects.local.model_file import MODEL_NAME, LocalSettings
from pipeline.agent import Agent
from pipeline.shell.replay import replay

pytestmark = pytest.mark.realserver


class Capital(pydantic.BaseModel):
    city: str
    country: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = LocalServer(tmp_path_factory.mktemp("structured"), LocalSettings(n_ctx=1024))
    srv._start()
    yield srv
    srv.stop()


@pytest.mark.parametrize(("mode", "stream"), [
    ("chat_completions", False), ("chat_completions", True), ("anthropic_messages", False)])
def test_the_grammar_shapes_the_local_model_s_answer(server: LocalServer, tmp_path: Path,
                                                     mode: str, stream: bool) -> None:
    with Agent(model=MODEL_NAME, base_url=server.base_url, api_key="none", api_mode=mode,
               stream=stream, home=tmp_path, max_tokens=96, context_length=1024) as agent:
        result = agent.run("What is the capital of France? Give the city and its country.",
                           output_type=Capital)
    assert result.completed, (result.turn_exit_reason, result.error, result.final_response)
    assert isinstance(result.output, Capital)
    assert result.output.city.strip() and result.output.country.strip()
    assert result.api_calls == 1  # the grammar made the first answer valid: no retry
    report = replay(tmp_path / "sessions", result.session_id)
    assert report.identical, report.describe()
