"""Oversized tool results: a preview with a marker reaches the model, the whole text a file."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from effects.eventlog.store import session_path
from effects.performers import Effects
from effects.tools.executor import ThreadPoolToolRunner, private_directory, spill, sweep
from pipeline.agent import Agent
from pipeline.settings import AgentSettings
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from pipeline.tools import ToolRegistry
from pipeline.toolsets import builtin_tools
from stages.log.events import SessionSettings
from stages.log.tool_specs import ToolInvocation
from stages.prompt.untrusted import unwrapped

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
        [result] = [unwrapped(m.content) for m in agent._runner.state.messages
                    if m.role == "tool"]
        assert len(result) < 3_000 and MARKER.search(result)
        assert Path(MARKER.search(result)[3]).read_text() == big()
    assert session_path(home / "sessions", session).stat().st_size < 30_000
    assert replay(home / "sessions", session).identical


def test_the_spilled_file_can_be_read_with_read_file(tmp_path) -> None:
    tools = builtin_tools(tmp_path / "work", toolsets=("files",))
    with ThreadPoolToolRunner(ToolRegistry([big, *tools]), max_result_chars=1_000) as runner:
        [outcome] = runner.run([ToolInvocation(call_id="c1", name="big", arguments="{}")],
                               concurrent=False, task_id="t1")
        path = MARKER.search(outcome.content)[3]
        [read] = runner.run([ToolInvocation(call_id="c2", name="read_file",
                                            arguments=f'{{"path": "{path}", "limit": 1}}')],
                            concurrent=False, task_id="t1")
    assert read.ok and read.content.startswith("1|0123456789")
    assert not Path(path).exists()


KEY = "sk-R4nd0mR4nd0mR4nd0mR4nd0m"


def test_the_spilled_file_is_redacted_private_and_in_a_private_directory(tmp_path) -> None:
    """Before, the file kept the key the log hid, 0644 in a 0755 directory of the shared /tmp."""
    text = f'api_key = "{KEY}"\nknown: pool-key-123456789\n' + "x" * 5_000
    cut = spill(text, name="t-c", directory=tmp_path / "spill", limit=100,
                secrets=["pool-key-123456789"])
    path = Path(MARKER.search(cut)[3])
    kept = path.read_text()
    assert KEY not in kept and "pool-key-123456789" not in kept and kept.endswith("x" * 5_000)
    assert KEY not in cut
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_spill_directory_with_loose_permissions_is_made_private(tmp_path) -> None:
    loose = tmp_path / "spill"
    loose.mkdir(mode=0o755)
    private_directory(loose)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700


def test_a_spill_directory_that_is_a_symlink_or_another_users_is_not_used(tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    cut = spill("y" * 500, name="c", directory=tmp_path / "link", limit=100)
    assert "could not be kept" in cut and not list(elsewhere.iterdir())
    if os.getuid() == 0:  # only root can hand a directory to another user
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 4242, 4242)
        with pytest.raises(OSError, match="not a directory of this user"):
            private_directory(theirs)


def test_closing_the_runner_removes_its_files_and_old_ones(tmp_path) -> None:
    stale = tmp_path / "old-task-c0.txt"
    stale.write_text("left by a process that died")
    os.utime(stale, (0, 0))
    runner = ThreadPoolToolRunner(ToolRegistry([big]), max_result_chars=1_000,
                                  spill_dir=tmp_path)
    [outcome] = runner.run([ToolInvocation(call_id="c1", name="big", arguments="{}")],
                           concurrent=False, task_id="t1")
    path = Path(MARKER.search(outcome.content)[3])
    assert path.exists()
    runner.close()
    assert not path.exists() and not stale.exists()


def test_sweep_does_not_follow_a_symlinked_directory(tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    old = elsewhere / "precious.txt"
    old.write_text("not ours to remove")
    os.utime(old, (0, 0))
    (tmp_path / "link").symlink_to(elsewhere)
    sweep(tmp_path / "link")
    assert old.exists()


def test_sweep_keeps_recent_files(tmp_path) -> None:
    recent = tmp_path / "t-c.txt"
    recent.write_text("a session still running may read me")
    sweep(tmp_path, max_age_s=3600, now=recent.stat().st_mtime + 60)
    assert recent.exists()


def test_an_agent_redacts_its_keys_in_the_file_and_removes_it_at_the_end(tmp_path) -> None:
    def leaky() -> str:
        """Return text holding the session's key."""
        return "the key is pool-key-123456789\n" * 10_000

    model = ScriptedModel(tool_calls(("leaky", {})), "done")
    with Agent(settings=SessionSettings(model="m", provider="custom"), tools=[leaky],
               secrets=["pool-key-123456789"],
               agent_settings=AgentSettings(home=tmp_path, max_tool_result_chars=50_000),
               effects=Effects(clock=FakeClock(), ids=CountingIds(), model=model)) as agent:
        agent.chat("leak it")
        [result] = [unwrapped(m.content) for m in agent._runner.state.messages
                    if m.role == "tool"]
        path = Path(MARKER.search(result)[3])
        assert "pool-key-123456789" not in path.read_text()
    assert not path.exists()


def test_the_world_readable_directory_of_earlier_versions_is_removed_when_ours(
        tmp_path, monkeypatch) -> None:
    from effects.tools import executor
    legacy = tmp_path / "mibyan-tool-results"
    legacy.mkdir(mode=0o755)
    (legacy / "t-c1.txt").write_text("a key, world-readable")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("not ours to remove")
    (legacy / "link").symlink_to(elsewhere)
    monkeypatch.setattr(executor, "LEGACY_SPILL_DIR", legacy)
    ThreadPoolToolRunner(ToolRegistry([]), spill_dir=tmp_path / "spill").close()
    assert not legacy.exists() and (elsewhere / "precious.txt").exists()


def test_a_symlink_or_a_file_where_the_old_directory_was_is_left(tmp_path) -> None:
    from effects.tools.executor import remove_legacy_spill_dir
    target = tmp_path / "target"
    target.mkdir()
    (target / "f.txt").write_text("keep")
    (tmp_path / "link").symlink_to(target)
    remove_legacy_spill_dir(tmp_path / "link")
    assert (tmp_path / "link").is_symlink() and (target / "f.txt").exists()
    (tmp_path / "file").write_text("keep")
    remove_legacy_spill_dir(tmp_path / "file")
    assert (tmp_path / "file").read_text() == "keep"
    remove_legacy_spill_dir(tmp_path / "missing")
