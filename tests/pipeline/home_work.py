"""A home for the whole-home work (replay, export, the insights index) run in one process, on
many and on Ray: the sample home (compressed lineages, failed tools, several models), a few
evaluation sessions, and a session whose turns name a credential label of their own."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.agent import Agent
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.eval_sessions import record_sessions
from tests.sample_home import record

# Said to the model in the labelled session; the export is told it is TEAM_KEY's key.
LATE_SECRET = "team-secret-0123456789abcdef"


def record_home(home: Path, sessions: int = 6) -> Path:
    """The home's ``sessions`` folder."""
    record(home)
    record_sessions(home, sessions)
    was = os.environ.get("TEAM_KEY")
    os.environ["TEAM_KEY"] = "sk-team-recorded-key-aaaaaaaaaaaa"
    try:
        with FakeOpenAIServer(Reply.text(f"noted {LATE_SECRET}")) as server, \
                Agent(base_url=server.base_url, home=home, model="team-model",
                      credentials=["TEAM_KEY"], stream=False) as agent:
            agent.run(f"remember {LATE_SECRET}")
    finally:
        if was is None:
            del os.environ["TEAM_KEY"]
        else:
            os.environ["TEAM_KEY"] = was
    return home / "sessions"
