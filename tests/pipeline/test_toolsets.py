"""The built-in toolset through a whole session: real files, real processes, a replay."""

from __future__ import annotations

import json

import pytest

from pipeline.agent import Agent
from pipeline.hooks import Hooks
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from pipeline.toolsets import TOOLSETS, builtin_tools
from stages.errors import UsageError
from stages.prompt.untrusted import unwrapped


def _tool_results(agent: Agent) -> list:
    assert agent._runner is not None
    # What the tools returned (rules 7 sends each as a data block).
    contents = [unwrapped(m.content or "") for m in agent._runner.state.messages
                if m.role == "tool"]
    return [json.loads(c) if c.startswith("{") else c for c in contents]


def test_toolsets_choose_the_tools(tmp_path) -> None:
    everything = builtin_tools(tmp_path, toolsets=tuple(TOOLSETS))
    assert [t.name for t in everything] == [n for names in TOOLSETS.values() for n in names]
    files = builtin_tools(tmp_path, toolsets=("files",))
    assert [t.name for t in files] == list(TOOLSETS["files"])
    assert [t.spec.read_only for t in files] == [True, False, False, True]
    assert builtin_tools(tmp_path, toolsets=("interactive",)).tools[0].spec.interactive
    with pytest.raises(UsageError, match="unknown toolset"):
        builtin_tools(tmp_path, toolsets=("files", "browser"))


def test_a_coding_session_edits_real_files_and_replays(tmp_path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    model = ScriptedModel(
        tool_calls(("read_file", {"path": "calc.py"}), ("search_files", {"pattern": "a - b"})),
        tool_calls(("patch", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"})),
        tool_calls(("write_file", {"path": "test_calc.py",
                                   "content": "from calc import add\nassert add(2, 3) == 5\n"})),
        tool_calls(("terminal", {"command": "python3 test_calc.py && echo passed"}),
                   ("todo", {"todos": [{"id": "1", "content": "fix add",
                                        "status": "completed"}]})),
        "Fixed: add now adds.")
    tools = builtin_tools(work, toolsets=tuple(TOOLSETS))
    with Agent(client=model, tools=tools, home=tmp_path / "home", clock=FakeClock(),
               ids=CountingIds()) as agent:
        assert agent.chat("fix add in calc.py") == "Fixed: add now adds."
        results = _tool_results(agent)
        session = agent.session_id
    tools.close()
    model.assert_complete()
    assert (work / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert results[0] == "1|def add(a, b):\n2|    return a - b"
    assert results[2] == {"path": "calc.py", "replacements": 1}
    assert results[4] == {"exit_code": 0, "output": "passed\n"}
    assert results[5]["todos"][0]["status"] == "completed"
    assert replay(tmp_path / "home" / "sessions", session).identical


def test_a_tool_error_reaches_the_model_as_its_result(tmp_path) -> None:
    model = ScriptedModel(tool_calls(("read_file", {"path": "/etc/passwd"})), "I may not.")
    with Agent(client=model, tools=builtin_tools(tmp_path, toolsets=("files",)),
               home=tmp_path / "home") as agent:
        agent.chat("show /etc/passwd")
        [result] = _tool_results(agent)
    assert result["error"].startswith("ToolError: path '/etc/passwd' is outside")


def test_a_resumed_session_takes_up_its_todo_list_and_close_stops_processes(tmp_path) -> None:
    home = tmp_path / "home"
    items = [{"id": "1", "content": "port the parser", "status": "in_progress"}]
    first = builtin_tools(tmp_path, toolsets=("planning", "terminal"))
    model = ScriptedModel(tool_calls(("todo", {"todos": items}),
                                     ("terminal", {"command": "sleep 60", "background": True})),
                          "noted")
    with Agent(client=model, tools=first, home=home) as agent:
        agent.chat("plan it")
        session = agent.session_id
        process = first.terminal._background["bg1"].process
    assert process.poll() is not None  # closing the agent stopped it
    again = builtin_tools(tmp_path, toolsets=("planning",))
    with Agent(client=ScriptedModel(tool_calls(("todo", {})), "still there"), tools=again,
               home=home, session_id=session) as agent:
        agent.chat("what is left?")
        last = [m.content for m in agent._runner.state.messages if m.role == "tool"][-1]
    assert json.loads(unwrapped(last))["todos"] == items


def test_repaired_and_repeated_calls_through_a_session_replay(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    model = ScriptedModel(
        tool_calls(("ReadFile", '{"path": "a.txt",}'), ("read_file", {"path": "a.txt"}),
                   ("read_file", {"path": "a.txt", "limit": 1})),
        "read it")
    with Agent(client=model, tools=builtin_tools(tmp_path, toolsets=("files",)),
               home=tmp_path / "home", clock=FakeClock(), ids=CountingIds()) as agent:
        agent.chat("read a.txt")
        results = _tool_results(agent)
        session = agent.session_id
    # The repaired first call is the same as the second: that one does not run again.
    assert results[0] == results[2] == "1|alpha"
    assert results[1]["duplicate_of"] == "call_1"
    assert replay(tmp_path / "home" / "sessions", session).identical


def test_interrupting_the_agent_kills_a_running_command(tmp_path) -> None:
    hooks = Hooks()
    holder: list[Agent] = []
    hooks.register("pre_tool_call", lambda **kw: holder[0].interrupt())
    model = ScriptedModel(tool_calls(("terminal", {"command": "sleep 30"})))
    with Agent(client=model, tools=builtin_tools(tmp_path, toolsets=("terminal",)),
               home=tmp_path / "home", hooks=hooks) as agent:
        holder.append(agent)
        result = agent.run("wait a while")
        [killed] = _tool_results(agent)
    assert result.interrupted and killed["interrupted"] is True
    assert replay(tmp_path / "home" / "sessions", result.session_id).identical
