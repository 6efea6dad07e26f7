"""Recorded sessions to evaluate: each asks a question, looks it up with a tool (which fails
for every third question), and answers, against the fake OpenAI server on loopback."""

from __future__ import annotations

from pathlib import Path

from effects.performers import Effects
from pipeline.agent import Agent
from pipeline.providers import ProviderRouter
from pipeline.settings import AgentSettings
from pipeline.testing import CountingIds, FakeClock
from pipeline.tools import tool
from stages.log.events import SessionSettings
from tests.fake_openai import FakeOpenAIServer, Reply


@tool(read_only=True)
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    if query.endswith("0"):
        raise ValueError("nothing found")
    return f"found {query}"


def record_sessions(home: Path, count: int, *, turns: int = 1) -> list[str]:
    """``count`` sessions of ``turns`` turns each (a tool call, then the answer "answer N")."""
    ids = []
    with FakeOpenAIServer() as srv:
        for n in range(count):
            settings = SessionSettings(model="gpt-4o-mini", provider="openai",
                                       base_url=srv.base_url, stream=False)
            with Agent(settings=settings,
                       agent_settings=AgentSettings(home=home, durability="flush"),
                       effects=Effects(clock=FakeClock(), ids=CountingIds(prefix=f"rec{n}_"),
                                       model=ProviderRouter(default_key="sk-eval", keys={})),
                       tools=[lookup]) as agent:
                for turn in range(turns):
                    srv.script(Reply.tool_calls([("lookup", f'{{"query": "q{n % 3}"}}')]),
                               Reply.text(f"answer {n}"))
                    agent.run(f"question {n}.{turn}")
                assert agent.session_id is not None
                ids.append(agent.session_id)
    return ids
