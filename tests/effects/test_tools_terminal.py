"""The terminal tool with real processes in a temporary working tree."""

from __future__ import annotations

import gc
import tempfile
import threading

import pytest

from effects.tools.executor import RUNNING_INTERRUPT
from effects.tools.terminal import Terminal
from effects.tools.workspace import ToolError, Workspace


@pytest.fixture
def term(tmp_path):
    terminal = Terminal(Workspace(root=tmp_path), max_output=200)
    yield terminal
    terminal.close()


def test_a_command_runs_in_the_working_tree_and_returns_its_exit_code(term, tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    assert term.terminal("pwd; echo oops >&2; exit 4") == {
        "exit_code": 4, "output": f"{tmp_path}\noops\n"}
    assert term.terminal("pwd", workdir="sub")["output"] == f"{tmp_path / 'sub'}\n"


def test_long_output_is_cut_in_the_middle(term) -> None:
    out = term.terminal("seq 1 10000")["output"]
    assert len(out) < 300 and out.startswith("1\n2\n") and out.endswith("9999\n10000\n")
    assert "characters left out" in out


def test_a_command_over_its_timeout_is_killed(term) -> None:
    result = term.terminal("echo started; sleep 30", timeout=1)
    assert result["timed_out"] is True and result["exit_code"] is None
    assert result["output"] == "started\n" and "killed" in result["error"]


def test_bad_requests_are_clear_errors(term) -> None:
    with pytest.raises(ToolError, match="empty"):
        term.terminal("  ")
    with pytest.raises(ToolError, match="timeout must be"):
        term.terminal("true", timeout=0)
    with pytest.raises(ToolError, match="outside"):
        term.terminal("true", workdir="/")
    with pytest.raises(ToolError, match="no background process"):
        term.process("kill", "bg9")
    with pytest.raises(ToolError, match="action must be"):
        term.process("restart", "bg1")


def test_background_processes_are_listed_read_and_killed(term) -> None:
    started = term.terminal("exec sleep 60", background=True)
    assert started == {"process_id": "bg1", "started": True}
    listed = term.process("list")["processes"]
    assert listed == [{"process_id": "bg1", "command": "exec sleep 60",
                       "running": True, "exit_code": None}]
    killed = term.process("kill", "bg1")
    assert killed["running"] is False and killed["exit_code"] == -9


def test_a_background_process_output_can_be_read(term) -> None:
    term.terminal("echo ready; exit 2", background=True)
    term._background["bg1"].process.wait()
    assert term.process("output", "bg1") == {"process_id": "bg1", "running": False,
                                             "exit_code": 2, "output": "ready\n"}


def test_close_kills_what_still_runs(tmp_path) -> None:
    terminal = Terminal(Workspace(root=tmp_path))
    terminal.terminal("sleep 60", background=True)
    process = terminal._background["bg1"].process
    terminal.close()
    assert process.poll() is not None


def test_an_interrupt_kills_a_running_command(term) -> None:
    interrupt = threading.Event()
    interrupt.set()
    token = RUNNING_INTERRUPT.set(interrupt)
    try:
        result = term.terminal("echo started; sleep 30")
    finally:
        RUNNING_INTERRUPT.reset(token)
    assert result["interrupted"] is True and result["exit_code"] is None
    assert "interrupted" in result["error"]


def test_output_larger_than_a_pipe_buffer_does_not_block(tmp_path) -> None:
    terminal = Terminal(Workspace(root=tmp_path))
    result = terminal.terminal("head -c 300000 /dev/zero | tr '\\0' x")
    assert result["exit_code"] == 0
    assert "[... 250000 characters left out ...]" in result["output"]


def test_a_terminal_leaves_nothing_in_the_temporary_directory(tmp_path, monkeypatch) -> None:
    """Every agent has a terminal: each one left a directory behind (15,000 in a day of
    tests), and with it its background commands' output."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    work = tmp_path / "work"
    work.mkdir()
    quiet = Terminal(Workspace(root=work))
    quiet.terminal("true")
    quiet.close()
    assert list(scratch.iterdir()) == []
    busy = Terminal(Workspace(root=work))
    busy.terminal("echo token-in-output; exit 0", background=True)
    busy._background["bg1"].process.wait()
    assert busy.process("output", "bg1")["output"] == "token-in-output\n"
    assert len(list(scratch.iterdir())) == 1
    busy.close()
    assert list(scratch.iterdir()) == []


def test_a_terminal_never_closed_removes_its_output_when_collected(tmp_path, monkeypatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    terminal = Terminal(Workspace(root=tmp_path))
    terminal.terminal("echo hi", background=True)
    terminal._background["bg1"].process.wait()
    del terminal
    gc.collect()
    assert list(scratch.iterdir()) == []
