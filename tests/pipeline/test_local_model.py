"""The embedded local model as the default provider: a real llama.cpp server (not ours) with a
real model, through the whole pipeline. Needs the [local] extra, which CI installs."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.providers import local_endpoint
from pipeline.shell.replay import replay
from pipeline.tools import tool
from stages.errors import ProviderNotConfiguredError
from stages.recovery.classify import classify_api_error

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("local-home")


@pytest.fixture(autouse=True)
def no_provider(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MIBYAN_MODEL"):
        monkeypatch.delenv(name, raising=False)


def kinds(home: Path, sid: str) -> list:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", sid))]


def test_a_streamed_turn_on_the_local_model_answers_records_usage_and_replays(home):
    deltas: list[str] = []
    with Agent(home=home, max_tokens=24) as agent:
        assert agent.settings.provider == "local"
        result = agent.run_conversation("What is the capital of France?",
                                        stream_callback=deltas.append)
    assert result["completed"] and "Paris" in result["final_response"]
    assert "".join(deltas) == result["final_response"]
    usage = result["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert replay(home / "sessions", result["session_id"]).identical


def test_a_forced_tool_call_runs_and_its_result_reaches_the_model(home):
    seen: list[str] = []

    @tool(read_only=True)
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: The city.
        """
        seen.append(city)
        return f"It is sunny in {city}."

    with Agent(home=home, tools=[get_weather], tool_choice="required", max_turns=1,
               max_tokens=64) as agent:
        result = agent.run_conversation("What is the weather in Paris?")
    assert len(seen) == 1 and seen[0]
    tool_messages = [m for m in result["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == f"It is sunny in {seen[0]}."
    assert result["turn_exit_reason"] == "max_iterations_reached(1/1)"
    assert result["final_response"]
    assert replay(home / "sessions", result["session_id"]).identical


def test_a_prompt_over_the_context_window_is_classified_as_overflow(home):
    with Agent(home=home, max_retries=0, max_tokens=8) as agent:
        result = agent.run_conversation("word " * 9000)
    assert result["failed"] and "context" in result["error"]
    [failure] = [e for e in kinds(home, result["session_id"]) if e.kind == "model_failed"]
    assert failure.status == 400
    reason = classify_api_error(failure, provider="local", api_mode="chat_completions").reason
    assert reason == "context_overflow"
    assert replay(home / "sessions", result["session_id"]).identical


def _main_job(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MIBYAN_MODEL")}
    env["MIBYAN_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "pipeline.cli.main", "run", "--workdir",
                           str(cwd), *args], check=False, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_readme_main_job_answers_right_in_one_call_and_shows_its_progress(home, tmp_path):
    # Issue 25: the main job was "What files are in this directory?", which the 135M model
    # answered with invented files (it was offered tools it cannot use), in 1-8 minutes of
    # silence. Now it is a question the model answers, with no tools, in seconds.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    main_job = re.search(r'uv run mibyan run "([^"]+)"\s+# main job', readme)
    assert main_job is not None, "the README's first command is the main job"
    done = _main_job(home, tmp_path, main_job.group(1))
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    assert "embedded local model" in done.stderr and "| 1 calls |" in done.stderr
    assert "no tools are offered" in done.stderr
    assert re.search(r"reads about \d+ prompt tokens", done.stderr)
    assert "text_response(finish_reason=stop)" in done.stderr


def test_without_the_extra_the_error_names_the_settings_and_the_extra(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    missing = ProviderNotConfiguredError("no model provider is configured (OPENAI_API_KEY)")
    with pytest.raises(ProviderNotConfiguredError, match=r"OPENAI_API_KEY.*mibyan\[local\]"):
        local_endpoint(tmp_path, missing)


def test_a_server_that_dies_mid_session_is_restarted_and_the_session_goes_on(home):
    from effects.local.llama_server import LocalServer
    with Agent(home=home, max_tokens=8, retry_base_delay=0.01) as agent:
        first = agent.run_conversation("One word, please.")
        server = LocalServer.get(home)
        server._proc.kill()
        server._proc.wait()
        second = agent.run_conversation("Another word.")
    # Eight tokens cut most replies short, and a cut reply is continued (rules 3): whether the
    # answer completes is not the point here, that no call fails is.
    assert not first["failed"] and not second["failed"]
    assert LocalServer.get(home) is not server  # a new child took over
    # The router asks for the server's address before each call, so the dead child is replaced
    # before the next request: no call fails.
    assert not [e for e in kinds(home, second["session_id"]) if e.kind == "model_failed"]
    assert replay(home / "sessions", second["session_id"]).identical


def test_agents_on_two_homes_in_one_process_do_not_restart_each_others_server(
        home, tmp_path, monkeypatch):
    # Issue 30: one server per process, keyed by home and settings, so each agent's call
    # killed the other's child and started its own (19 restarts; both turns failed).
    from effects.local.llama_server import LocalServer
    starts: list[LocalServer] = []
    start = LocalServer._start

    def counted(self: LocalServer) -> None:
        starts.append(self)
        start(self)

    monkeypatch.setattr(LocalServer, "_start", counted)
    same = tmp_path / "same"  # no config.toml, like `home`: the same server
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.toml").write_text("[local]\nn_ctx = 2048\n", encoding="utf-8")
    with Agent(home=home, max_tokens=8) as a, Agent(home=same, max_tokens=8) as b, \
            Agent(home=other, max_tokens=8) as c:
        pids = {name: LocalServer.get(h).pid for name, h in
                (("home", home), ("same", same), ("other", other))}
        results = [agent.run_conversation(prompt) for agent, prompt in
                   ((a, "One word, please."), (c, "Say hi."), (b, "Another word."),
                    (a, "A last word."))]
        after = {name: LocalServer.get(h).pid for name, h in
                 (("home", home), ("same", same), ("other", other))}
    assert after == pids and pids["home"] == pids["same"] != pids["other"]
    assert len(starts) <= 2  # `home`'s may run already, from an earlier test
    for agent_home, result in zip((home, other, same, home), results, strict=True):
        assert not result["failed"], result["error"]
        assert not [e for e in kinds(agent_home, result["session_id"])
                    if e.kind == "model_failed"]
