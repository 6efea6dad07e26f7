"""Oversized tool results: a preview with a marker reaches the model, the whole text a file."""

from __future__ import annotations

import re
from pathlib import Path

from effects.eventlog import session_path
from effects.tool_runner import ThreadPoolToolRunner, spill
from pipeline.agent import Agent
from pipeline.replay import replay
from pipeline.runner import Effects
from pipeline.settings import AgentSettings
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from pipeline.tools import ToolRegistry
from pipeline.toolsets import builtin_tools
from stages.events import SessionSettings
from stages.tools import ToolInvocation

MARKER = re.compile(r"\[output truncated: (\d+) characters, (\d+) lines in all; the whole "
                    r"output is in (\S+); read it with read_file and offset/limit\]$")


def test_a_result_within_the_cap_is_unchanged(tmp_path) -> None:
    assert spill("x" * 10, name="c", directory=tmp_path, limit=10) == "x" * 10
    assert not list(tmp_path.iterdir())


def test_a_result_over_the_cap_is_a_preview_and_a_file(tmp_path) -> None:
    text = "line\n" * 1000
    cut = spill(text, name="task/../call 1", directory=tmp_path, limit=100)
    found = MARKER.search(cut)
    assert found and cut.startswith(text[:100])
    assert (int(found[1]), int(found[2])) == (5000, 1001)
    path = Path(found[3])
    assert path.parent == tmp_path and path.name == "task_.._call_1.txt"
    assert path.read_text() == text


def big() -> str:
    """Return a lot of text."""
    return "0123456789" * 1_000_000


def test_a_user_tool_returning_10_mb_grows_the_log_by_a_preview(tmp_path) -> None:
    """Before the cap, the whole 10 MB went to the model and into the log."""
    home = tmp_path / "home"
    model = ScriptedModel(tool_calls(("big", {})), "done")
    with Agent(settings=SessionSettings(model="m", provider="custom"), tools=[big],
               agent_settings=AgentSettings(home=home, max_tool_result_chars=50_000),
               effects=Effects(clock=FakeClock(), ids=CountingIds(), model=model)) as agent:
        agent.chat("make it big")
        session = agent.session_id
        [result] = [m.content for m in agent._runner.state.messages if m.role == "tool"]
    assert len(result) < 3_000 and MARKER.search(result)
    assert Path(MARKER.search(result)[3]).read_text() == big()
    assert session_path(home / "sessions", session).stat().st_size < 30_000
    assert replay(home / "sessions", session).identical


def test_the_spilled_file_can_be_read_with_read_file(tmp_path) -> None:
    tools = builtin_tools(tmp_path / "work", toolsets=("files",))
    runner = ThreadPoolToolRunner(ToolRegistry([big, *tools]), max_result_chars=1_000)
    [outcome] = runner.run([ToolInvocation(call_id="c1", name="big", arguments="{}")],
                           concurrent=False, task_id="t1")
    path = MARKER.search(outcome.content)[3]
    [read] = runner.run([ToolInvocation(call_id="c2", name="read_file",
                                        arguments=f'{{"path": "{path}", "limit": 1}}')],
                        concurrent=False, task_id="t1")
    assert read.ok and read.content.startswith("1|0123456789")
