"""Secrets in what tools print reach neither the log nor an export, in the shapes the built-in
tools print them: read_file numbers its lines ("4|password: ..."), grep -n prefixes the file
("app.yaml:2:password: ...")."""

from __future__ import annotations

import pytest

from effects.eventlog.store import session_path
from pipeline.agent import Agent
from pipeline.export.exporter import export_sessions
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from pipeline.toolsets import builtin_tools

SECRET = "hunter2-Zq9"


@pytest.mark.parametrize(("tool", "arguments"), [
    ("read_file", {"path": "app.yaml"}),
    ("terminal", {"command": "grep -n password app.yaml"}),
])
def test_a_password_line_a_tool_prints_is_masked_in_the_log_and_the_export(
        tmp_path, tool: str, arguments: dict) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.yaml").write_text(f"user: admin\npassword: {SECRET}\n")
    home = tmp_path / "home"
    with Agent(client=ScriptedModel(tool_calls((tool, arguments)), "ok"), clock=FakeClock(),
               ids=CountingIds(), home=home, model="m", stream=False,
               tools=builtin_tools(work)) as agent:
        result = agent.run_conversation("show me the config")
        session_id = agent.session_id
    assert result["completed"]
    assert session_id is not None
    log = session_path(home / "sessions", session_id).read_text()
    assert "password: ***" in log and SECRET not in log
    out = tmp_path / "out.jsonl"
    export_sessions(home / "sessions", out, fmt="sharegpt")
    assert SECRET not in out.read_text()
