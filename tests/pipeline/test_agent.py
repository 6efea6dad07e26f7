"""End-to-end: the Agent over real HTTP against the in-tree fake OpenAI server."""

from __future__ import annotations

import copy
import json
import threading

import attrs
import pytest

from effects.eventlog.store import read_envelopes, session_path
from pipeline import AgentSettings, Effects, SessionSettings, TurnResult
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from pipeline.tools import tool
from stages.errors import LogConflictError, UsageError
from stages.log.alternation import violations
from stages.log.messages import from_openai
from stages.prompt.untrusted import boundary, wrap
from tests.fake_openai import Reply, Usage

KEY = "sk-proj-ThisIsASecretKey0123456789"


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def boom() -> str:
    """Always fails."""
    raise RuntimeError("tool exploded")


def make(server, home, **kw) -> Agent:
    kw.setdefault("tools", [add, boom])
    return Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home, **kw)


def log_text(home, sid) -> str:
    return session_path(home / "sessions", sid).read_text()


@pytest.mark.parametrize("stream", [True, False])
def test_text_turn_reports_answer_usage_and_replays(server, home, stream):
    server.script(Reply.text("Hello there.", usage=Usage(prompt=40, completion=5, cached=10,
                                                         reasoning=2)))
    deltas: list[str] = []
    with make(server, home, stream=stream) as agent:
        result = agent.run_conversation("hi", stream_callback=deltas.append)
    assert result["final_response"] == "Hello there."
    assert result["completed"] and not result["failed"] and not result["interrupted"]
    assert result["turn_exit_reason"] == "text_response(finish_reason=stop)"
    assert result["api_calls"] == 1
    assert result["usage"] == {"input_tokens": 30, "output_tokens": 5, "cache_read_tokens": 10,
                               "cache_write_tokens": 0, "reasoning_tokens": 2, "total_tokens": 45}
    assert ("".join(deltas) == "Hello there.") if stream else deltas == []
    assert server.requests[0].get("stream", False) is stream
    assert server.request_headers[0]["authorization"] == f"Bearer {KEY}"
    assert replay(home / "sessions", result["session_id"]).identical


def test_tool_calls_run_concurrently_and_results_keep_call_order(server, home):
    barrier = threading.Barrier(2, timeout=30)  # generous: a loaded machine starts threads late

    @tool(read_only=True)
    def wait(tag: str) -> str:
        """Wait for the other call, proving both run at once."""
        barrier.wait()
        return tag

    server.script(Reply.tool_calls([("wait", '{"tag": "first"}'), ("wait", '{"tag": "second"}'),
                                    ("add", '{"a": 2, "b": "40"}')]),
                  Reply.text("done"))
    with make(server, home, tools=[wait, add]) as agent:
        result = agent.run_conversation("go")
    tool_msgs = [m for m in result["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["first", "second", "42"]
    # The fake server numbers calls across the whole run: compare with the reply's own ids.
    calls = [c["id"] for m in result["messages"] if m["role"] == "assistant"
             for c in m.get("tool_calls") or ()]
    assert len(set(calls)) == 3
    assert [m["tool_call_id"] for m in tool_msgs] == calls
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} == {"wait", "add"}
    assert not violations([from_openai(m) for m in result["messages"]])


def test_bad_tool_calls_become_error_results_not_crashes(server, home):
    server.script(Reply.tool_calls([("nope", "{}"), ("add", '{"a": 1'), ("boom", "{}"),
                                    ("add", '{"a": "x", "b": 1}')]),
                  Reply.text("sorry"))
    with make(server, home) as agent:
        result = agent.run_conversation("break things")
    assert result["completed"] and result["final_response"] == "sorry"
    contents = [json.loads(m["content"])["error"] for m in result["messages"]
                if m["role"] == "tool"]
    assert "does not exist" in contents[0] and "add, boom" in contents[0]
    assert "not valid JSON" in contents[1]
    assert contents[2] == "RuntimeError: tool exploded"
    assert "a" in contents[3] and "integer" in contents[3]
    kinds = [e.kind for e in read_envelopes(session_path(home / "sessions",
                                                          result["session_id"]))]
    assert kinds.count("tool_call_rejected") == 2 and kinds.count("tool_ran") == 2
    assert replay(home / "sessions", result["session_id"]).identical


def test_budget_exhaustion_asks_for_a_summary_without_tools(server, home):
    server.script(Reply.tool_calls([("add", '{"a": 1, "b": 1}')]),
                  Reply.tool_calls([("add", '{"a": 2, "b": 2}')]),
                  Reply.text("Summary: added twice."))
    with make(server, home, max_turns=2) as agent:
        result = agent.run_conversation("keep adding")
    assert result["final_response"] == "Summary: added twice."
    assert result["turn_exit_reason"] == "max_iterations_reached(2/2)"
    assert result["api_calls"] == 3 and not result["completed"]
    last = server.requests[-1]
    assert "tools" not in last
    # Rules 3: the request's note, after its system prompt; the history keeps no such message.
    assert last["messages"][0]["role"] == "system"
    assert "maximum number of tool-calling iterations" in last["messages"][0]["content"]
    assert last["messages"][-1]["role"] == "tool"
    assert replay(home / "sessions", result["session_id"]).identical


def test_child_budget_is_capped_by_delegation_limit(server, home):
    with make(server, home, delegation_max_iterations=3) as parent:
        child = parent.child(max_turns=100)
        assert child.settings.max_turns == 3
        assert child.parent_session_id == parent.session_id
        assert parent.child().settings.max_turns == 3
        assert parent.child(max_turns=2).settings.max_turns == 2


@pytest.mark.parametrize("reply, expected", [
    (Reply.error(500, "upstream broke", type="server_error"), "HTTP 500"),
    (Reply.error(401, "Incorrect API key provided", code="invalid_api_key"), "HTTP 401"),
    (Reply.raw(200, b"<html>not json</html>"), "not JSON"),
    (Reply.raw(200, b'{"id": "x", "choices": []}'), "without a usable choice"),
    (Reply.drop_stream(after_chunks=2), "dropped the connection"),
])
def test_provider_failures_end_the_turn_cleanly_and_stay_resumable(server, home, reply, expected):
    server.script(reply, Reply.text("recovered"))
    with make(server, home, max_retries=0) as agent:
        failed = agent.run_conversation("first")
        assert failed["failed"] and not failed["completed"] and expected in failed["error"]
        assert failed["final_response"] is None
        ok = agent.run_conversation("second")
    assert ok["final_response"] == "recovered"
    roles = [m["role"] for m in ok["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert ok["messages"][1]["content"].startswith("[no reply:")
    assert replay(home / "sessions", ok["session_id"]).identical


def test_history_is_not_mutated_and_resume_continues_the_log(server, home):
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "noted"}]
    snapshot = copy.deepcopy(history)
    server.script(Reply.text("one"), Reply.text("two"))
    with make(server, home) as agent:
        first = agent.run_conversation("now", conversation_history=history)
    assert history == snapshot
    assert [m["content"] for m in first["messages"]] == ["earlier", "noted", "now", "one"]
    with make(server, home, session_id=first["session_id"]) as again:
        second = again.run_conversation("more")
    assert [m["content"] for m in second["messages"]][-2:] == ["more", "two"]
    assert len(server.requests[1]["messages"]) == 6  # system + 5
    assert second["session_usage"]["total_tokens"] > second["usage"]["total_tokens"]
    assert replay(home / "sessions", first["session_id"]).identical


def test_resume_of_unknown_session_is_a_usage_error(server, home):
    with pytest.raises(UsageError, match="no session"):
        make(server, home, session_id="nosuch").chat("hi")


def test_second_writer_of_a_session_is_refused(server, home):
    server.script(Reply.text("a"))
    with make(server, home) as agent:
        sid = agent.run_conversation("x")["session_id"]
        with pytest.raises(LogConflictError):
            make(server, home, session_id=sid).chat("y")


def test_killed_process_leaves_a_resumable_session(server, home):
    """A torn record and an unfinished turn: the next open cuts the tear and closes the turn."""
    server.script(Reply.tool_calls([("add", '{"a": 1, "b": 2}')]), Reply.text("fresh start"))
    agent = make(server, home)
    runner = agent._open()
    sid = runner.state.session_id
    tools_effect = agent._effects.tools

    class Killed(BaseException):
        pass

    def die(*args, **kwargs):
        raise Killed
    agent._effects.tools = type("Dead", (), {"run": staticmethod(die)})()
    with pytest.raises(Killed):
        agent.run_conversation("do a thing")
    agent._log.close()
    tools_effect.shutdown()
    path = session_path(home / "sessions", sid)
    with path.open("ab") as fh:
        fh.write(b'{"session_id": "torn')
    with make(server, home, session_id=sid) as again:
        result = again.run_conversation("try again")
    assert result["final_response"] == "fresh start"
    messages = result["messages"]
    assert json.loads(messages[2]["content"])["error"].startswith("the process stopped")
    assert not violations([from_openai(m) for m in messages])
    report = replay(home / "sessions", sid)
    assert report.identical, report.describe()


def test_interrupt_between_steps_stops_the_turn(server, home):
    holder: list[Agent] = []

    @tool
    def interrupting() -> str:
        """Asks the agent to stop."""
        holder[0].interrupt()
        return "stopping"

    server.script(Reply.tool_calls([("interrupting", "{}")]))
    with make(server, home, tools=[interrupting]) as agent:
        holder.append(agent)
        result = agent.run_conversation("go")
    assert result["interrupted"] and result["turn_exit_reason"] == "interrupted_by_user"
    assert result["api_calls"] == 1 and result["final_response"] is None
    assert replay(home / "sessions", result["session_id"]).identical


def test_secrets_never_reach_the_log(server, home):
    leaked = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"

    @tool
    def env() -> str:
        """Print the environment."""
        return f"OPENAI_API_KEY={KEY}\nGITHUB_TOKEN={leaked}"

    server.script(Reply.tool_calls([("env", "{}")]), Reply.text(f"your key is {KEY}"))
    with make(server, home, tools=[env]) as agent:
        result = agent.run_conversation(f"my key is {KEY}")
    text = log_text(home, result["session_id"])
    assert KEY not in text and leaked not in text
    assert KEY not in json.dumps(result["messages"])
    assert replay(home / "sessions", result["session_id"]).identical


@pytest.mark.parametrize("reply", [Reply.hang(10), Reply.text("x" * 300, chunk_delay=0.05)])
def test_interrupt_during_a_model_call_returns_and_closes_the_request(server, home, reply):
    import time
    server.script(reply)
    deltas: list[str] = []
    interrupted_at: list[float] = []

    def interrupt_once_the_request_is_in_flight() -> None:
        # Waiting on the server, not on a timer: a loaded machine may take long to send it.
        deadline = time.monotonic() + 30
        while server.pending and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        interrupted_at.append(time.monotonic())
        agent.interrupt()

    with make(server, home) as agent:
        threading.Thread(target=interrupt_once_the_request_is_in_flight, daemon=True).start()
        result = agent.run_conversation("slow", stream_callback=deltas.append)
        returned = time.monotonic()
    assert result["interrupted"] and result["turn_exit_reason"] == "interrupted_during_api_call"
    assert returned - interrupted_at[0] < 0.5
    assert result["messages"][-1] == {"role": "assistant", "content": "[no reply: interrupted by user]"}
    kinds = [e.kind for e in read_envelopes(session_path(home / "sessions",
                                                          result["session_id"]))]
    assert "interrupted" in kinds and "model_replied" not in kinds
    assert replay(home / "sessions", result["session_id"]).identical


def test_an_interrupt_between_turns_stops_the_next_at_its_first_step(server, home):
    server.script(Reply.text("fine"))
    with make(server, home) as agent:
        agent.interrupt()
        stopped = agent.run_conversation("hello")
        result = agent.run_conversation("hello again")
    assert stopped["interrupted"] and stopped["api_calls"] == 0
    assert result["completed"] and result["final_response"] == "fine"


# --- the front door: settings values, child agents, TurnResult, test doubles -------------------

def test_child_is_an_evolve_of_the_parent_settings_and_shares_its_effects(server, home,
                                                                           monkeypatch):
    monkeypatch.setenv("KEY_A", "sk-child-test-aaaaaaaaaaaa")
    monkeypatch.setenv("KEY_B", "sk-child-test-bbbbbbbbbbbb")
    fallback = {"provider": "anthropic", "model": "claude-x", "base_url": server.base_url,
                "key_env": "KEY_B"}
    parent = Agent(model="fake-model", base_url=server.base_url, home=home,
                   credentials=["KEY_A", "KEY_B"], credential_strategy="least_used",
                   credential_refresh=lambda label: None, fallback_providers=[fallback],
                   max_retries=1, retry_base_delay=0.5, rate_limit_cooldown=7.0,
                   prompt_caching=False, cache_ttl="1h", delegation_max_iterations=4,
                   durability="flush", timeout=12, deadline=34)
    with parent, parent.child(max_turns=9) as child:
        assert child.settings == attrs.evolve(parent.settings, max_turns=4)
        assert child.agent_settings == attrs.evolve(
            parent.agent_settings, parent_session_id=parent.session_id)
        assert child.model_client is parent.model_client
        assert child._effects.refresh == parent._effects.refresh is not None
        assert child._effects.clock is parent._effects.clock
        assert child._secrets is parent._secrets
        assert child._effects.tools is not parent._effects.tools


def test_child_overrides_settings_and_re_resolves_the_api_mode(server, home):
    with make(server, home) as parent:
        child = parent.child(provider="anthropic", model="claude-x", durability="flush")
        assert (child.settings.provider, child.settings.api_mode) == (
            "anthropic", "anthropic_messages")
        assert child.durability == "flush"
        with pytest.raises(UsageError, match="unknown settings: colour"):
            parent.child(colour="blue")
        with pytest.raises(UsageError, match="max_tokens"):
            parent.child(max_tokens=0)


def test_run_returns_a_turn_result_and_run_conversation_its_dict(server, home):
    server.script(Reply.text("one"), Reply.text("two"))
    with make(server, home) as agent:
        result = agent.run("first")
        as_dict = agent.run_conversation("second")
    assert isinstance(result, TurnResult)
    assert result.final_response == "one" and result.completed
    assert result.usage.total_tokens == result.as_dict()["usage"]["total_tokens"] > 0
    assert [m.content for m in result.messages] == ["first", "one"]
    assert set(as_dict) == set(result.as_dict())
    assert as_dict["messages"][-1] == {"role": "assistant", "content": "two"}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.final_response = "changed"  # type: ignore[misc]


def test_an_agent_from_values_reads_no_config_and_runs_on_test_doubles(home):
    home.mkdir()
    (home / "config.toml").write_text('model = "a config that does not parse as settings"\n')
    with pytest.raises(UsageError, match="model must be a table"):
        Agent(model="m", home=home)
    model = ScriptedModel(tool_calls(("add", {"a": 2, "b": 3})), "It is 5.")
    clock = FakeClock()
    agent = Agent(settings=SessionSettings(model="m", provider="custom"),
                  agent_settings=AgentSettings(home=home, durability="flush"),
                  effects=Effects(clock=clock, ids=CountingIds(), model=model), tools=[add])
    with agent:
        result = agent.run("2 + 3?")
    model.assert_complete()
    assert result.final_response == "It is 5." and result.session_id == "session_0001"
    assert model.requests[1].messages[-1].content == wrap("5", name="add",
                                                          code=boundary("session_0001"))
    assert replay(home / "sessions", "session_0001").identical


def test_settings_and_configuration_keywords_do_not_mix(home):
    with pytest.raises(UsageError, match="either settings= or configuration keywords"):
        Agent(settings=SessionSettings(model="m", provider="custom"), max_turns=3)
    with pytest.raises(ValueError, match="max_tokens"):  # settings are checked when built
        SessionSettings(model="m", provider="custom", max_tokens=0)


def test_a_failed_turn_names_the_provider_and_endpoint_used(server, home):
    server.script(Reply.error(500, "upstream broke", type="server_error"))
    with make(server, home, max_retries=0) as agent:
        failed = agent.run_conversation("hi")
    assert failed["failed"] and f"[openai at {server.base_url}]" in failed["error"]
    with Agent(model="m", base_url="http://127.0.0.1:9/v1", api_key=KEY, home=home,
               max_retries=0) as nowhere:
        unreachable = nowhere.run_conversation("hi")
    assert unreachable["failed"] and "[openai at http://127.0.0.1:9/v1]" in unreachable["error"]


def test_an_agent_from_values_redacts_with_its_routers_secrets(server, home):
    from pipeline.providers import ProviderRouter

    plain = "plain-secret-no-pattern-0123456789"  # only the known secrets can mask it
    router = ProviderRouter(default_key=plain, keys={})
    server.script(Reply.text(f"the key is {plain}"))
    agent = Agent(settings=SessionSettings(model="fake", provider="openai",
                                           base_url=server.base_url),
                  agent_settings=AgentSettings(home=home),
                  effects=Effects(clock=FakeClock(), ids=CountingIds(), model=router))
    with agent:
        result = agent.run("hi")
    assert result.completed and plain not in log_text(home, result.session_id)


def test_an_agent_never_closed_releases_its_session_when_collected(server, home):
    """An agent dropped without close() must not keep its session locked in this process."""
    import gc
    server.script(Reply.text("a"), Reply.text("b"))
    agent = make(server, home)
    sid = agent.run_conversation("x")["session_id"]
    del agent
    gc.collect()
    with make(server, home, session_id=sid) as again:
        assert again.run_conversation("y")["final_response"] == "b"


def test_a_collected_agent_releases_its_session_whoever_still_holds_the_log(server, home):
    """The lock goes with the agent, not with the last object (here its journal, elsewhere a
    thread or a kept traceback) that happens to reference the open file."""
    import gc
    server.script(Reply.text("a"), Reply.text("b"))
    agent = make(server, home)
    sid = agent.run_conversation("x")["session_id"]
    held = agent._runner.journal
    del agent
    gc.collect()
    with make(server, home, session_id=sid) as again:
        assert again.run_conversation("y")["final_response"] == "b"
    assert held is not None
