"""Steering a running turn (rules 8), against the fake OpenAI server on loopback, which records
every request: a message steered while a tool batch runs arrives in the very next request;
``interrupt(message)`` ends the step and goes on with the message; both replay identically."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock
from pipeline.tools import Tool
from stages.log import events as ev
from tests.fake_openai import FakeOpenAIServer, Reply

STEER = "use the staging database, not production"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv
        srv.assert_done()


def _agent(server: FakeOpenAIServer, home, tools) -> Agent:
    return Agent(model="fake-model", base_url=server.base_url, api_key="sk-test", home=home,
                 clock=FakeClock(), ids=CountingIds(), stream=False, max_retries=0,
                 tools=tools)


def _kinds(home, session_id: str) -> list[str]:
    return [from_payload(e.kind, e.schema_version, e.payload).kind
            for e in read_envelopes(session_path(home / "sessions", session_id))]


def test_a_message_steered_during_a_tool_batch_arrives_in_the_very_next_request(
        server, tmp_path) -> None:
    holder: list[Agent] = []

    def migrate(target: str) -> str:
        """Run the migrations.

        Args:
            target: which database
        """
        holder[0].steer(STEER)  # from the tool runner's thread, while the batch runs
        return f"migrated {target}"

    server.script(Reply.tool_calls([("migrate", '{"target": "production"}')]),
                  Reply.tool_calls([("migrate", '{"target": "staging"}')]),
                  Reply.text("Migrated staging."))
    home = tmp_path / "home"
    with _agent(server, home, [Tool.from_function(migrate)]) as agent:
        holder.append(agent)
        result = agent.run("migrate the database")
    assert result.completed and result.final_response == "Migrated staging."
    first, second, third = server.requests
    # After the batch's result, before the next request: as the user's, after the tool's.
    assert [m["role"] for m in second["messages"][-3:]] == ["assistant", "tool", "user"]
    assert second["messages"][-1]["content"] == STEER
    assert STEER not in str(first["messages"])
    # The second batch steered again: that one joins the third request.
    assert third["messages"][-1] == {"role": "user", "content": STEER}
    kinds = _kinds(home, agent.session_id)
    assert kinds.count("steered") == 2
    assert kinds.index("steered") > kinds.index("tool_ran")
    assert replay(home / "sessions", agent.session_id).identical


def test_interrupt_with_a_message_ends_the_step_and_goes_on_with_it(server, tmp_path) -> None:
    holder: list[Agent] = []

    def build(target: str) -> str:
        """Build a target.

        Args:
            target: what to build
        """
        holder[0].interrupt("stop: build the docs instead")
        return f"built {target}"

    server.script(Reply.tool_calls([("build", '{"target": "all"}'), ("build", '{"target": "x"}')]),
                  Reply.text("Building the docs."))
    home = tmp_path / "home"
    with _agent(server, home, [Tool.from_function(build, interactive=True)]) as agent:
        holder.append(agent)
        result = agent.run("build everything")
    assert result.completed and result.final_response == "Building the docs."
    assert len(server.requests) == 2
    follow = server.requests[1]["messages"]
    assert follow[-1] == {"role": "user", "content": "stop: build the docs instead"}
    events = [from_payload(e.kind, e.schema_version, e.payload)
              for e in read_envelopes(session_path(home / "sessions", agent.session_id))]
    finished = [e for e in events if isinstance(e, ev.TurnFinished)]
    assert [f.interrupted for f in finished] == [True, False]
    assert replay(home / "sessions", agent.session_id).identical


def test_a_message_steered_between_turns_is_answered(server, tmp_path) -> None:
    server.script(Reply.text("Hello."), Reply.text("Noted."))
    home = tmp_path / "home"
    with _agent(server, home, []) as agent:
        agent.steer("and keep it short")  # nothing runs: the next turn's answer takes it
        result = agent.run("hi")
    assert result.final_response == "Noted."
    assert server.requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "and keep it short"}]
    assert replay(home / "sessions", agent.session_id).identical
