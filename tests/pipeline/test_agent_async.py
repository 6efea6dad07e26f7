"""The async API and the typed events: ``Agent.arun``, ``Agent.stream``, ``Agent.iter``,
against the fake OpenAI server over real HTTP."""

from __future__ import annotations

import asyncio
import threading

import pytest

from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.run_events import (
    FellBack,
    ReasoningDelta,
    Retrying,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from pipeline.shell.replay import replay
from pipeline.tools import tool
from tests.fake_openai import Reply

KEY = "sk-proj-ThisIsASecretKey0123456789"


@tool(read_only=True)  # no checkpoint of the working tree before it runs
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def make(server, home, **kw) -> Agent:
    return Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home,
                 tools=[add], stream=True, **kw)


def kinds(home, sid) -> list[str]:
    return [e.kind for e in read_envelopes(session_path(home / "sessions", sid))]


def test_stream_yields_typed_events_in_order_and_ends_with_the_result(server, home):
    server.script(Reply.tool_calls([("add", '{"a": 2, "b": 3}')], ids=["call_a"]),
                  Reply.text("It is 5.", reasoning="adding"))

    async def go(agent):
        return [event async for event in agent.stream("2 + 3?")]

    with make(server, home) as agent:
        events = asyncio.run(go(agent))
        sid = agent.session_id
    started = events.index(ToolStarted(call_id="call_a", name="add",
                                       arguments='{"a":2,"b":3}'))
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolFinished))
    assert started < finished
    assert events[finished].ok and events[finished].name == "add"
    text = [e for e in events[finished:] if isinstance(e, TextDelta)]
    assert "".join(e.text for e in text) == "It is 5."
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "adding"
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].result.final_response == "It is 5."
    assert events[-1].to_dict()["result"]["final_response"] == "It is 5."
    assert replay(home / "sessions", sid).identical


def test_arun_returns_what_run_returns_and_runs_off_the_event_loop(server, home):
    server.script(Reply.text("first"), Reply.text("second"))
    threads: list[str] = []

    async def go(agent):
        loop_thread = threading.current_thread().name
        result = await agent.arun("hi", stream_callback=lambda _: threads.append(
            threading.current_thread().name))
        return loop_thread, result

    with make(server, home) as agent:
        loop_thread, result = asyncio.run(go(agent))
        sync = agent.run("again")
    assert result.final_response == "first" and sync.final_response == "second"
    assert threads and loop_thread not in threads  # the model call streamed in a worker
    assert result.session_id == sync.session_id


def test_cancelling_arun_interrupts_the_turn_and_the_log_stays_consistent(server, home):
    server.script(Reply.hang(30), Reply.text("after"))

    async def go(agent):
        task = asyncio.create_task(agent.arun("wait"))
        while not server.requests:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with make(server, home) as agent:
        asyncio.run(go(agent))
        sid = agent.session_id
        assert agent.run("next").final_response == "after"
    logged = kinds(home, sid)
    first_end = logged.index("turn_finished")
    assert "interrupted" in logged[:first_end] and "turn_aborted" not in logged
    assert replay(home / "sessions", sid).identical


def test_iter_shows_each_step_and_the_caller_can_stop(server, home):
    server.script(Reply.tool_calls([("add", '{"a": 1, "b": 1}')]))
    with make(server, home) as agent:
        seen = []
        with agent.iter("1 + 1?") as run:
            for step in run:
                seen.append(step.stage)
                if step.stage == "tools":
                    break
        assert run.result is not None and run.result.interrupted
        assert seen[0] == "input" and "model_call" in seen
        sid = agent.session_id
    assert len(server.requests) == 1  # stopped: the second call never went out
    assert replay(home / "sessions", sid).identical


def test_async_iter_steps_the_same_machine(server, home):
    server.script(Reply.text("done"))

    events = []

    async def go(agent):
        async with agent.iter("hi", on_event=events.append) as run:
            return [step.stage async for step in run], run.result

    with make(server, home) as agent:
        stages, result = asyncio.run(go(agent))
    assert stages[0] == "input" and stages.count("model_call") == 1
    assert result.final_response == "done"
    assert events[-1] == TurnFinished(result=result)


def test_run_on_event_reports_retries_and_fallbacks(server, home, monkeypatch):
    from tests.fake_openai import FakeOpenAIServer
    server.script(Reply.error(500, "boom", type="server_error"),
                  Reply.error(500, "boom", type="server_error"))
    monkeypatch.setenv("FALLBACK_KEY", KEY)
    events = []
    with FakeOpenAIServer() as other:
        other.script(Reply.text("from the fallback"))
        with make(server, home, max_retries=1, retry_base_delay=0.01,
                  fallback_providers=[{"provider": "custom", "model": "other",
                                       "base_url": other.base_url,
                                       "key_env": "FALLBACK_KEY"}]) as agent:
            result = agent.run("hi", on_event=events.append)
    assert result.final_response == "from the fallback"
    assert any(isinstance(e, Retrying) and e.action == "retry" for e in events)
    assert any(isinstance(e, FellBack) and e.provider_index == 1 for e in events)
    assert isinstance(events[-1], TurnFinished)


def test_tool_events_mask_known_secrets(server, home):
    server.script(Reply.tool_calls([("echo", '{"text": "' + KEY + '"}')]), Reply.text("ok"))

    @tool(read_only=True)
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: What to say.
        """
        return text

    events = []
    with Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home,
               tools=[echo]) as agent:
        agent.run("say it", on_event=events.append)
    shown = repr([e.to_dict() for e in events])
    assert KEY not in shown
    assert any(isinstance(e, ToolFinished) for e in events)


def test_leaving_a_stream_early_interrupts_the_turn(server, home):
    server.script(Reply.text("one two three four five six seven eight nine ten " * 20,
                             piece_size=4, chunk_delay=0.05), Reply.text("next"))

    async def go(agent):
        async for event in agent.stream("count"):
            if isinstance(event, TextDelta):
                break

    with make(server, home) as agent:
        asyncio.run(go(agent))
        sid = agent.session_id
        assert agent.run("again").final_response == "next"
    logged = kinds(home, sid)
    assert "interrupted" in logged[:logged.index("turn_finished")]
    assert replay(home / "sessions", sid).identical
