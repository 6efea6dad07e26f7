"""Plugin hooks: blocking and observing tool calls, turn and session hooks, isolation of a
hook that raises, plugins from the entry-point group, replay."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from pipeline import hooks as hooks_module
from pipeline.agent import Agent
from pipeline.hooks import Hooks, refresh_plugins
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from stages.errors import UsageError
from stages.prompt.untrusted import unwrapped


def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


def _agent(tmp_path, model, hooks):
    return Agent(client=model, tools=[shout], home=tmp_path / "home", clock=FakeClock(),
                 ids=CountingIds(), hooks=hooks)


def test_pre_tool_call_blocks_with_a_reason_the_model_reads(tmp_path) -> None:
    hooks = Hooks()
    seen: list[dict] = []

    @hooks.on("pre_tool_call")
    def veto(*, name, arguments, call_id, task_id):
        return "no shouting at night" if arguments.get("text") == "boo" else None

    @hooks.on("post_tool_call")
    def watch(**kwargs):
        seen.append(kwargs)

    model = ScriptedModel(tool_calls(("shout", {"text": "boo"}), ("shout", {"text": "hi"})), "ok")
    with _agent(tmp_path, model, hooks) as agent:
        agent.chat("shout")
        # The history holds tool results marked as data (rules 7): the tool's own text inside.
        results = [unwrapped(m.content or "") for m in agent._runner.state.messages
                   if m.role == "tool"]
        session = agent.session_id
    assert json.loads(results[0]) == {"error": "blocked by a plugin: no shouting at night"}
    assert results[1] == "HI"
    assert [(s["name"], s["ok"], s["content"]) for s in seen] == [("shout", True, "HI")]
    assert seen[0]["duration_ms"] >= 0 and seen[0]["error"] is None
    assert replay(tmp_path / "home" / "sessions", session).identical


def test_a_hook_that_raises_is_isolated(tmp_path, caplog) -> None:
    hooks = Hooks()
    calls = []
    hooks.register("pre_tool_call", lambda **kw: 1 / 0)
    hooks.register("pre_tool_call", lambda **kw: calls.append(kw["name"]))
    hooks.register("turn_end", lambda **kw: {}["missing"])
    model = ScriptedModel(tool_calls(("shout", {"text": "a"})), "done")
    with _agent(tmp_path, model, hooks) as agent:
        assert agent.chat("go") == "done"
    assert calls == ["shout"]
    assert "hook.failed" in caplog.text


def test_turn_and_session_hooks_fire_in_order(tmp_path) -> None:
    hooks = Hooks()
    order: list[str] = []
    for event in ("turn_start", "turn_end", "session_start", "session_end"):
        hooks.register(event, lambda event=event, **kw: order.append(event))
    model = ScriptedModel("one", "two")
    with _agent(tmp_path, model, hooks) as agent:
        agent.chat("a")
        agent.chat("b")
    agent.close()
    assert order == ["session_start", "turn_start", "turn_end", "turn_start", "turn_end",
                     "session_end"]


def test_a_hook_registered_between_turns_fires_from_the_next_turn_on(tmp_path) -> None:
    hooks = Hooks()
    seen: list[str] = []
    with _agent(tmp_path, ScriptedModel("one", "two"), hooks) as agent:
        agent.chat("a")  # no hooks yet
        hooks.register("turn_end", lambda *, session_id, result: seen.append(
            result.final_response))
        agent.chat("b")
    assert seen == ["two"]
    with pytest.raises(KeyError):
        hooks.fire("turn_ended")  # a typo is not taken for an event nobody watches


def test_an_unknown_event_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown hook event 'pre_tool'"):
        Hooks().register("pre_tool", print)


@pytest.fixture
def fresh_plugins():
    """Plugins found anew before the test and after it (it installs one at run time, which
    the agents of later tests must not find)."""
    refresh_plugins()
    yield
    refresh_plugins()


def test_plugins_register_through_the_entry_point_group(tmp_path, monkeypatch,
                                                         fresh_plugins) -> None:
    dist = tmp_path / "mibyan_demo_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mibyan-demo-plugin\n"
                                   "Version: 1.0\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""\
        [mibyan.plugins]
        demo = mibyan_demo_plugin:register
        broken = mibyan_demo_plugin:missing
        """))
    (tmp_path / "mibyan_demo_plugin.py").write_text(textwrap.dedent("""\
        def register(hooks):
            hooks.register("pre_tool_call", lambda **kw: "the demo plugin says no")
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    refresh_plugins()  # installed while the process runs: found once asked to look again
    hooks = Hooks()
    assert hooks.load_plugins() == ["demo"]
    model = ScriptedModel(tool_calls(("shout", {"text": "a"})), "done")
    with Agent(client=model, tools=[shout], home=tmp_path / "home") as agent:
        agent.chat("go")
        [result] = [m.content for m in agent._runner.state.messages if m.role == "tool"]
    assert "the demo plugin says no" in result
    sys.modules.pop("mibyan_demo_plugin", None)


def test_plugins_are_found_once_per_process(tmp_path, monkeypatch, fresh_plugins) -> None:
    scans: list[str] = []
    entry_points = hooks_module.metadata.entry_points

    def counted(**kwargs):
        scans.append(kwargs["group"])
        return entry_points(**kwargs)

    monkeypatch.setattr(hooks_module.metadata, "entry_points", counted)
    for name in ("a", "b"):
        Agent(client=ScriptedModel(), home=tmp_path / name).close()
    assert scans == [hooks_module.ENTRY_POINT_GROUP]
    refresh_plugins()
    Agent(client=ScriptedModel(), home=tmp_path / "c").close()
    assert len(scans) == 2
