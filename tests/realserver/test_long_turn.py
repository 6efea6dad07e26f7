"""A long turn against llama.cpp's own server (issue 27), in each API mode it serves: the
embedded model, forced to call a tool at every step (``tool_choice="required"``: a 135M model
cannot be relied on to choose tools), reads file after file on a 2,048-token window until its
call budget ends the turn with its answer. The agent is told a larger window, so the server's
real refusal starts the recovery (overflow, compress, retry) and teaches the window; the same
model writes every summary. Every call runs, the conversation outgrows the window, no
request the server answered was over its window, and the session replays byte for byte."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from effects.local.llama_server import LocalServer
from effects.local.model_file import MODEL_NAME, LocalSettings
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.tools import Tool
from stages.fold import fold
from stages.log import events as ev
from tests.pipeline.long_turn_scenario import events_of

pytestmark = pytest.mark.realserver

# Sized for two busy cores, where the 135M model answers a step in 5 to 30 seconds.
N_CTX, TOLD, CALLS = 2_048, 8_192, 10
KEY = "lane-key"
MODES = ["chat_completions", "codex_responses", "anthropic_messages"]
NOTE = ("The museum opens at nine, the train leaves from platform four, lunch is booked for "
        "noon and the hotel is near the river. ")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = LocalServer(tmp_path_factory.mktemp("long-turn-lane"), LocalSettings(n_ctx=N_CTX),
                      api_key=KEY)
    srv._start()
    yield srv
    srv.stop()


@dataclass(frozen=True)
class RealOutcome:
    result: dict
    events: list[ev.Event]
    tool_chars: int
    seconds: float

    def count(self, kind: type) -> int:
        return sum(isinstance(e, kind) for e in self.events)


def run_real(server: LocalServer, home: Path, mode: str, *, calls: int = CALLS) -> RealOutcome:
    """One turn of ``calls`` model calls (the last one answers) in ``mode``."""
    files = itertools.count()
    chars = 0

    def read() -> str:
        """Read the next file."""
        nonlocal chars
        text = f"file {next(files)}: " + NOTE * 13
        chars += len(text)
        return text

    started = time.perf_counter()
    with Agent(model=MODEL_NAME, base_url=server.base_url, api_key=KEY, api_mode=mode,
               home=home, stream=False, tools=[Tool.from_function(read, read_only=True)],
               tool_choice="required", max_turns=calls, max_tokens=48, context_length=TOLD,
               max_retries=1, retry_base_delay=0.01) as agent:
        result = agent.run_conversation("Read the files one at a time, then say what they hold.")
    return RealOutcome(result=result, events=events_of(home, result["session_id"]),
                       tool_chars=chars, seconds=time.perf_counter() - started)


@pytest.mark.parametrize("mode", MODES)
def test_a_long_forced_turn_on_a_small_window_runs_every_call(server, tmp_path, mode) -> None:
    outcome = run_real(server, tmp_path, mode)
    result = outcome.result
    assert not result["failed"], result["error"]
    assert result["turn_exit_reason"] == f"max_iterations_reached({CALLS}/{CALLS})"
    assert result["final_response"]  # the model's answer without tools, after the budget
    assert outcome.count(ev.ToolRan) == CALLS - 1
    assert outcome.tool_chars // 4 > 3 * N_CTX // 2  # the calls alone outgrew the window
    # The server's own refusal taught the window: no call it answered was over it.
    failures = [e for e in outcome.events if isinstance(e, ev.ModelFailed)]
    assert failures and all(e.status == 400 for e in failures), failures
    assert fold(outcome.events).context.window_cap == N_CTX
    served = [e.usage.input_tokens for e in outcome.events if isinstance(e, ev.ModelReplied)]
    assert max(served) <= N_CTX
    assert outcome.count(ev.ContextCompressed) >= 2
    assert outcome.count(ev.ContextSummarised) >= 1
    report = replay(tmp_path / "sessions", result["session_id"])
    assert report.identical, report.describe()
