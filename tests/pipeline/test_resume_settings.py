"""A resumed session (a fork too) goes on with the settings it recorded, each replaced only by
an argument; the environment and config.toml choose for new sessions, and give the keys."""

from __future__ import annotations

import pytest

from pipeline import settings as settings_module
from pipeline.agent import Agent
from pipeline.config import resume_provider
from pipeline.testing import FakeClock, ScriptedModel
from stages.errors import UsageError
from stages.log.events import SessionSettings
from tests.fake_openai import Reply
from tests.pipeline.test_cli import PROVIDER_VARIABLES

KEY = "sk-resume-test-key-0123456789"


@pytest.fixture(autouse=True)
def no_provider(monkeypatch):
    """No provider variable set, and the embedded model refusing to start: a resume that
    reaches it lost the session's endpoint."""
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def fell_back(home, missing):
        raise AssertionError(f"fell back to the embedded local model ({missing})")
    monkeypatch.setattr(settings_module, "local_endpoint", fell_back)


def _start(server, home) -> str:
    server.script(Reply.text("first"))
    with Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home,
               max_turns=7, max_tokens=99, reasoning="low", stream=False) as agent:
        session_id = agent.run("one").session_id
    assert session_id is not None
    return session_id


def test_a_resumed_session_keeps_its_model_endpoint_and_settings(server, home, monkeypatch):
    session_id = _start(server, home)
    monkeypatch.setenv("MIBYAN_MODEL", "env-model")  # it names the model of new sessions only
    server.script(Reply.text("second"))
    with Agent(session_id=session_id, home=home) as resumed:
        assert resumed.run("two").final_response == "second"
        kept = resumed.settings
    assert (kept.model, kept.provider, kept.base_url, kept.api_mode) == (
        "fake-model", "openai", server.base_url, "chat_completions")
    assert (kept.max_turns, kept.max_tokens, kept.reasoning_effort, kept.stream) == (
        7, 99, "low", False)
    assert server.requests[-1]["model"] == "fake-model"


def test_an_argument_replaces_only_its_own_setting(server, home):
    session_id = _start(server, home)
    server.script(Reply.text("second"))
    with Agent(model="other-model", session_id=session_id, home=home, max_tokens=12,
               reasoning=2048) as resumed:
        resumed.run("two")
        changed = resumed.settings
    assert (changed.model, changed.base_url, changed.max_tokens, changed.max_turns) == (
        "other-model", server.base_url, 12, 7)
    assert (changed.reasoning_effort, changed.reasoning_budget) == (None, 2048)
    assert server.requests[-1]["model"] == "other-model"


def test_a_fork_is_resumed_with_the_settings_it_was_forked_with(server, home, monkeypatch):
    session_id = _start(server, home)
    with Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home) as agent, \
            agent.fork(session_id, model="forked-model") as forked:
        fork_id = forked.session_id
    monkeypatch.setenv("MIBYAN_MODEL", "fake-model")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.script(Reply.text("from the fork"))
    with Agent(session_id=fork_id, home=home) as resumed:
        assert resumed.run("x").final_response == "from the fork"
    assert server.requests[-1]["model"] == "forked-model"


def test_a_caller_s_client_resumes_under_the_session_s_names(home):
    with Agent(model="named", provider="mine", client=ScriptedModel("hello"), home=home,
               clock=FakeClock()) as agent:
        session_id = agent.run("one").session_id
    with Agent(session_id=session_id, client=ScriptedModel("again"), home=home,
               clock=FakeClock()) as resumed:
        assert (resumed.settings.model, resumed.settings.provider) == ("named", "mine")


# --- the endpoint of a resumed session, from its recorded settings ---------------------------

def _session(**kw) -> SessionSettings:
    return SessionSettings(**{"model": "gpt-4o", "provider": "openai",
                              "base_url": "https://api.openai.com/v1", **kw})


def test_a_hosted_endpoint_takes_its_key_from_the_environment_or_says_which_is_missing():
    resolved = resume_provider(_session(), env={"OPENAI_API_KEY": KEY, "MIBYAN_MODEL": "x"})
    assert (resolved.model, resolved.base_url, resolved.api_key) == (
        "gpt-4o", "https://api.openai.com/v1", KEY)
    with pytest.raises(UsageError, match="OPENAI_API_KEY is not set"):
        resume_provider(_session(), env={})
    pooled = resume_provider(_session(credentials=("POOL_KEY",)), env={}, pooled=True)
    assert pooled.base_url == "https://api.openai.com/v1"


def test_the_configured_url_gives_back_the_credentials_the_log_left_out():
    env = {"OPENAI_BASE_URL": "http://user:pw-secret@host.test/v1"}
    assert resume_provider(_session(base_url="http://host.test/v1"), env=env).base_url == \
        "http://user:pw-secret@host.test/v1"
    elsewhere = resume_provider(_session(base_url="http://other.test/v1"), env=env)
    assert elsewhere.base_url == "http://other.test/v1"


def test_another_provider_or_a_model_for_a_local_session_is_resolved_anew():
    env = {"ANTHROPIC_API_KEY": "sk-ant-resume-0000"}
    moved = resume_provider(_session(), provider="anthropic", model="claude-x", env=env)
    assert (moved.provider, moved.base_url) == ("anthropic", "https://api.anthropic.com")
    local = _session(provider="local", model="smollm2", base_url="http://127.0.0.1:1/v1")
    assert resume_provider(local, env={}).provider == "local"
    with pytest.raises(UsageError, match="OPENAI_API_KEY is not set"):
        resume_provider(local, model="gpt-4o", env={})
