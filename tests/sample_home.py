"""A recorded home with a little of everything the insights count, for the insights tests, the
notebooks and ``bench/insights.py``: real sessions through the agent against the fake OpenAI
server, on a fake clock (so every run logs the same times).

* ``alpha`` (model ``gpt-4o-mini``), day 1 at 09:00: a 503 retried, two tool calls (``add`` ok,
  ``boom`` failing), cached input tokens; then long turns that compress the context past its
  window, so the session goes on in two child sessions;
* ``beta`` (model ``claude-sonnet-4-5``), day 2 at 14:00: an interrupted turn, then a turn whose
  iteration budget runs out after a tool call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from pipeline.agent import Agent
from pipeline.testing import CountingIds, FakeClock
from tests.fake_openai import FakeOpenAIServer, Reply, Usage

__all__ = ["Sample", "record"]

HOUR = 3600.0


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def boom(x: int) -> int:
    """Always fails."""
    raise ValueError(f"no luck with {x}")


class SummarisingServer(FakeOpenAIServer):
    """The fake server, where a compressor's summary request gets a summary (the other requests
    get the scripted replies in order)."""

    def _record(self, body: dict[str, Any] | None, headers: dict[str, str]) -> Any:
        text = json.dumps(body or {})
        if "NEW TURNS TO INCORPORATE" in text or "CONVERSATION:" in text:
            with self._lock:
                self._requests.append(body)
                self._headers.append(headers)
            return Reply.text("## Goal\nchat\n## Done\n- a summary\n## Open Questions\n- none\n",
                              usage=Usage(600, 20))
        return super()._record(body, headers)


@attrs.frozen
class Sample:
    root: Path  # <home>/sessions
    alpha: tuple[str, ...]  # the chain: the first session, then its children
    beta: str


def record(home: Path) -> Sample:
    clock = FakeClock(tick=0.25)
    ids = CountingIds()
    with SummarisingServer() as server:
        clock.advance(9 * HOUR)
        alpha = _alpha(server, home, clock, ids)
        clock.advance(29 * HOUR)
        beta = _beta(server, home, clock, ids)
        server.assert_done()
    return Sample(root=home / "sessions", alpha=alpha, beta=beta)


def _agent(server: FakeOpenAIServer, home: Path, clock: FakeClock, ids: CountingIds,
           model: str, **kw: Any) -> Agent:
    return Agent(model=model, base_url=server.base_url, api_key="sk-sample", home=home,
                 clock=clock, ids=ids, tools=[add, boom], retry_base_delay=0.01,
                 durability="flush", stream=False, **kw)


def _alpha(server: FakeOpenAIServer, home: Path, clock: FakeClock,
           ids: CountingIds) -> tuple[str, ...]:
    server.script(Reply.error(503, "overloaded", type="server_error"),
                  Reply.tool_calls([("add", '{"a": 1, "b": 2}'), ("boom", '{"x": 1}')],
                                   usage=Usage(300, 20, cached=200)),
                  Reply.text("3", usage=Usage(400, 5, cached=300, reasoning=2)))
    seen = []
    with _agent(server, home, clock, ids, "gpt-4o-mini", context_length=2048) as agent:
        agent.run_conversation("add 1 and 2")
        seen.append(agent.session_id)
        for n in range(5):
            clock.advance(60)
            server.script(Reply.text(f"answer {n} " + "z" * 600))
            agent.run_conversation(f"question {n} " + "q" * 500)
            seen.append(agent.session_id)
    return tuple(s for s in dict.fromkeys(seen) if s is not None)


def _beta(server: FakeOpenAIServer, home: Path, clock: FakeClock, ids: CountingIds) -> str:
    server.script(Reply.tool_calls([("add", '{"a": 2, "b": 2}')]), Reply.text("4, I think"))
    with _agent(server, home, clock, ids, "claude-sonnet-4-5", max_turns=1) as agent:
        agent.interrupt()
        agent.run_conversation("never mind")
        agent.run_conversation("add 2 and 2")
        assert agent.session_id is not None
        return agent.session_id
