"""Context management against llama.cpp's own server with a 1,024-token window: a session
whose history needs several compressions (the summaries written by the same small model)
answers every turn, continues in child sessions, and every log replays."""

from __future__ import annotations

import pytest

from effects.eventlog.store import read_envelopes, session_path
from effects.local.llama_server import LocalServer
from effects.local.model_file import MODEL_NAME, LocalSettings
from pipeline.agent import Agent
from pipeline.shell.replay import replay

pytestmark = pytest.mark.realserver

N_CTX = 1024
# Enough turns for two compressions. Rules 5 ends a cut reply's continuations at its first
# restart, so a turn adds less history than under rules 4, when three turns were enough.
TURNS = 5
KEY = "lane-key"
FACT = ("I am planning a trip. We keep notes about it: the museum opens at nine, the train "
        "leaves from platform four, lunch is booked for noon, and the hotel is near the river. ")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("realserver-context")
    srv = LocalServer(home, LocalSettings(n_ctx=N_CTX), api_key=KEY)
    srv._start()
    yield srv
    srv.stop()


def test_a_long_session_in_a_small_window_answers_every_turn(server, tmp_path) -> None:
    sessions: list[str] = []
    with Agent(model=MODEL_NAME, base_url=server.base_url, api_key=KEY, provider="local",
               home=tmp_path, max_tokens=32, max_retries=1, retry_base_delay=0.01,
               stream=False) as agent:
        for n in range(TURNS):
            result = agent.run_conversation(f"Note {n}: {FACT * 2}Reply with one short "
                                            f"sentence about note {n}.")
            assert not result["failed"], (n, result["error"])
            assert result["final_response"], n
            sessions.append(result["session_id"])
        assert agent._runner is not None
        window = agent._runner.state.context.windows
    assert window and window[0].tokens == N_CTX  # the server's own n_ctx, probed
    chain = list(dict.fromkeys(sessions))
    assert len(chain) >= 2, chain  # a compression continued in a child
    compressions = [e for sid in chain
                    for e in read_envelopes(session_path(tmp_path / "sessions", sid))
                    if e.kind == "context_compressed"]
    assert len(compressions) >= 2  # several
    for sid in chain:
        assert replay(tmp_path / "sessions", sid).identical, sid
