"""Where settings come from: flags, then the environment, then config.toml."""

from __future__ import annotations

import re

import pytest

from pipeline import settings as settings_module
from pipeline.agent import Agent
from pipeline.config import credential_labels, load_file, provider_entry, resolve_provider
from pipeline.providers import split_userinfo
from pipeline.settings import AgentSettings
from pipeline.testing import FakeClock, ScriptedModel
from stages.errors import ProviderNotConfiguredError, UsageError
from stages.log.events import SessionSettings
from tests.stages.test_setting_checks import BAD as SETTING_RULES


def test_openai_key_alone_gives_the_openai_endpoint_and_default_model():
    resolved = resolve_provider(env={"OPENAI_API_KEY": "sk-a"})
    assert (resolved.provider, resolved.base_url, resolved.model) == (
        "openai", "https://api.openai.com/v1", "gpt-4o-mini")


def test_anthropic_provider_reads_its_own_key_and_endpoint():
    resolved = resolve_provider(provider="anthropic", model="claude-x",
                                env={"ANTHROPIC_API_KEY": "sk-ant-b"})
    assert (resolved.base_url, resolved.api_key) == ("https://api.anthropic.com", "sk-ant-b")


def test_flags_beat_environment_beats_file():
    file = {"model": {"name": "from-file", "base_url": "http://file/v1", "api_key_env": "MY_KEY"}}
    env = {"MY_KEY": "k", "MIBYAN_MODEL": "from-env"}
    assert resolve_provider(env=env, file=file).model == "from-env"
    assert resolve_provider(model="from-flag", env=env, file=file).model == "from-flag"
    assert resolve_provider(env={"MY_KEY": "k"}, file=file).base_url == "http://file/v1"


def test_nothing_configured_names_every_setting_consulted(tmp_path):
    with pytest.raises(ProviderNotConfiguredError) as caught:
        resolve_provider(env={"MIBYAN_HOME": str(tmp_path)})
    for setting in ("--base-url", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MIBYAN_MODEL",
                    str(tmp_path / "config.toml")):
        assert setting in str(caught.value)


def test_a_custom_endpoint_needs_a_model_name():
    # A usage error, not "nothing configured": that one would run the embedded model instead.
    with pytest.raises(UsageError, match="no model name") as caught:
        resolve_provider(base_url="http://localhost:8080/v1", env={})
    assert not isinstance(caught.value, ProviderNotConfiguredError)


def test_fallback_entries_resolve_their_api_mode_and_key_label():
    entry = provider_entry({"provider": "anthropic", "model": "claude-x",
                            "key_env": "ANTHROPIC_API_KEY"})
    assert (entry.api_mode, entry.base_url, entry.credentials) == (
        "anthropic_messages", "https://api.anthropic.com", ("ANTHROPIC_API_KEY",))
    with pytest.raises(UsageError, match="provider and model"):
        provider_entry({"model": "x"})


# --- each provider reads its own variables --------------------------------------------------

BOTH = {"OPENAI_BASE_URL": "http://openai.test/v1", "OPENAI_API_KEY": "sk-o",
        "ANTHROPIC_BASE_URL": "http://anthropic.test", "ANTHROPIC_API_KEY": "sk-ant-a"}


def test_anthropic_reads_anthropic_base_url_and_never_openais():
    resolved = resolve_provider(provider="anthropic", model="claude-x", env=BOTH)
    assert (resolved.base_url, resolved.api_key) == ("http://anthropic.test", "sk-ant-a")
    alone = resolve_provider(provider="anthropic", model="claude-x",
                             env={"OPENAI_BASE_URL": "http://openai.test/v1",
                                  "ANTHROPIC_API_KEY": "sk-ant-a"})
    assert alone.base_url == "https://api.anthropic.com"


def test_openai_ignores_anthropic_variables():
    resolved = resolve_provider(model="m", env=BOTH)
    assert (resolved.base_url, resolved.api_key) == ("http://openai.test/v1", "sk-o")


def test_openrouter_reads_its_own_key_and_endpoint():
    resolved = resolve_provider(provider="openrouter", model="x/y",
                                env={"OPENROUTER_API_KEY": "sk-or-k", "OPENAI_API_KEY": "sk-o"})
    assert (resolved.base_url, resolved.api_key) == ("https://openrouter.ai/api/v1", "sk-or-k")


def test_a_missing_model_name_names_the_provider_and_endpoint():
    with pytest.raises(UsageError, match="anthropic at http://anthropic.test"):
        resolve_provider(provider="anthropic", env=BOTH)


# --- config.toml of the wrong shape is a clear error ------------------------------------------

def write_config(home, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


@pytest.mark.parametrize("text, expected", [
    ('model = "oops"\n', "model must be a table"),
    ("[model]\nname = 5\n", r"\[model\] name must be a string, got 5"),
    ("[model]\nbase_url = true\n", r"\[model\] base_url must be a string"),
    ("[model]\ncredentials = 3\n", r"\[model\] credentials must be a string or a list"),
    ("[model]\ntimeout = \"soon\"\n", r"\[model\] timeout must be a number"),
    ("[model]\nnmae = \"typo\"\n", r"unknown setting \[model\] nmae"),
    ("fallback_providers = 1\n", "fallback_providers must be tables"),
])
def test_a_malformed_config_is_a_usage_error_naming_the_setting(home, text, expected):
    write_config(home, text)
    with pytest.raises(UsageError, match=expected):
        load_file(home)


def test_a_config_toml_that_is_a_directory_is_a_usage_error(home):
    (home / "config.toml").mkdir(parents=True)
    with pytest.raises(UsageError, match="cannot read"):
        load_file(home)


def test_a_single_credential_string_is_one_label():
    assert credential_labels("KEY") == ("KEY",)
    assert credential_labels(["A", "B"]) == ("A", "B")
    assert credential_labels(None) == ()
    with pytest.raises(UsageError, match="names of environment variables"):
        credential_labels(["A", 5])


def test_userinfo_is_split_off_the_base_url():
    assert split_userinfo("https://user:p%40ss@host.test:8443/v1") == (
        "https://host.test:8443/v1", "user:p@ss")
    assert split_userinfo("https://host.test/v1") == ("https://host.test/v1", None)
    assert split_userinfo(None) == (None, None)


# --- the Agent checks its settings before anything is logged ----------------------------------

URL = "http://127.0.0.1:9/v1"


def agent(home, **kw) -> Agent:
    kw.setdefault("model", "m")
    return Agent(base_url=URL, api_key="sk-config-test-key-000000", home=home, **kw)


@pytest.mark.parametrize("kw, expected", [
    ({"max_tokens": 0}, "max_tokens must be a whole number of at least 1, got 0"),
    ({"max_turns": 0}, "max_turns must be a whole number of at least 1"),
    ({"credential_strategy": "random"}, "unknown credential_strategy 'random'"),
    ({"timeout": -1}, "timeout must be a positive number of seconds, got -1"),
    ({"timeout": 0}, "timeout must be a positive number of seconds, got 0"),
    ({"deadline": float("nan")}, "deadline must be a positive number of seconds"),
    ({"max_retries": -1}, "max_retries must be a whole number of at least 0"),
    ({"cache_ttl": "2h"}, "cache_ttl must be one of 5m, 1h"),
    ({"durability": "never"}, "durability must be one of durable, flush"),
    ({"credentials": ["A", 5]}, "credentials must be names of environment variables"),
])
def test_bad_settings_are_usage_errors_before_anything_is_logged(home, kw, expected):
    with pytest.raises(UsageError, match=re.escape(expected)):
        agent(home, **kw).chat("hi")
    assert not (home / "sessions").exists()


def test_a_bad_strategy_in_config_toml_is_refused_too(home):
    write_config(home, '[model]\ncredential_strategy = "random"\n')
    with pytest.raises(UsageError, match="unknown credential_strategy 'random'"):
        agent(home)


def test_credentials_as_one_string_in_config_toml_is_one_label(home, monkeypatch):
    monkeypatch.setenv("KEY_ONE", "sk-one-0000000000000000")
    write_config(home, '[model]\ncredentials = "KEY_ONE"\n')
    with agent(home) as built:
        assert built.settings.credentials == ("KEY_ONE",)
        assert built.model_client.keys == {"KEY_ONE": "sk-one-0000000000000000"}
    with agent(home, credentials="KEY_ONE") as direct:
        assert direct.settings.credentials == ("KEY_ONE",)


def test_timeout_and_deadline_come_from_arguments_then_config_toml(home):
    with agent(home) as default:
        assert (default.model_client.timeout, default.model_client.deadline) == (600.0, 1800.0)
    write_config(home, "[model]\ntimeout = 30\ndeadline = 90.5\n")
    with agent(home) as from_file:
        assert (from_file.agent_settings.timeout, from_file.agent_settings.deadline) == (30, 90.5)
        assert (from_file.model_client.timeout, from_file.model_client.deadline) == (30, 90.5)
    with agent(home, timeout=5, deadline=10) as from_args:
        assert (from_args.model_client.timeout, from_args.model_client.deadline) == (5, 10)


def test_a_timeout_without_a_deadline_gives_three_read_timeouts(home):
    """As the adapters do: ``Agent(timeout=3)`` must not keep the 1,800 s default deadline
    (a keep-alive drip held such a call past 90 s)."""
    with agent(home, timeout=3) as from_args:
        assert from_args.agent_settings.deadline == 9
        assert (from_args.model_client.timeout, from_args.model_client.deadline) == (3, 9)
    write_config(home, "[model]\ntimeout = 30\n")
    with agent(home) as from_file:
        assert (from_file.model_client.timeout, from_file.model_client.deadline) == (30, 90)
    with agent(home, timeout=4) as argument_over_file:
        assert argument_over_file.model_client.deadline == 12
    write_config(home, "[model]\ntimeout = 30\ndeadline = 50\n")
    with agent(home, timeout=4) as given_deadline:
        assert given_deadline.model_client.deadline == 50
    assert AgentSettings(home=home, timeout=2).deadline == 6


def test_an_unwritable_home_is_a_usage_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(UsageError, match="cannot"):
        agent(blocker / "home").chat("hi")
    home = tmp_path / "home"
    home.mkdir()
    (home / "sessions").write_text("not a directory either")
    with pytest.raises(UsageError, match="cannot write session logs under"):
        agent(home).chat("hi")


def test_credentials_in_the_base_url_stay_out_of_the_settings(home):
    with Agent(model="m", base_url="http://user:hunter2hunter2@127.0.0.1:9/v1",
               home=home) as built:
        assert built.settings.base_url == "http://127.0.0.1:9/v1"
        assert "hunter2hunter2" in built.model_client.secrets


def test_from_config_is_what_agent_keywords_build(home, monkeypatch):
    monkeypatch.setenv("MIBYAN_MODEL", "from-env")
    write_config(home, '[model]\napi_mode = "codex_responses"\ndeadline = 60\n')
    with Agent.from_config(base_url=URL, api_key="sk-config-test-key-000000", home=home,
                           max_tokens=64) as built, \
            agent(home, model=None, max_tokens=64) as same:
        assert built.settings == same.settings
        assert built.agent_settings == same.agent_settings
        assert (built.settings.model, built.settings.api_mode) == ("from-env", "codex_responses")
        assert built.agent_settings.deadline == 60
        assert not (home / "sessions").exists()  # building an agent logs nothing
    with pytest.raises(TypeError, match="colour"):
        Agent.from_config(colour="blue", home=home)


# --- a model or provider named is never replaced by the embedded local model ----------------

PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "MIBYAN_MODEL")


@pytest.fixture
def no_provider(monkeypatch):
    """No provider variable set, and the embedded model refusing to start: a test that reaches
    it fell back to it."""
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)

    def fell_back(home, missing):
        raise AssertionError(f"fell back to the embedded local model ({missing})")
    monkeypatch.setattr(settings_module, "local_endpoint", fell_back)
    return monkeypatch


@pytest.mark.parametrize("kw, env, config, missing", [
    ({"model": "gpt-4o-mini"}, {}, "", "OPENAI_API_KEY"),
    ({"provider": "anthropic", "model": "claude-sonnet-4-5"}, {}, "", "ANTHROPIC_API_KEY"),
    ({"provider": "openrouter"}, {}, "", "OPENROUTER_API_KEY"),
    ({}, {"MIBYAN_MODEL": "gpt-4o-mini"}, "", "OPENAI_API_KEY"),
    ({}, {}, '[model]\nname = "gpt-4o"\n', "OPENAI_API_KEY"),
    ({}, {}, '[model]\nprovider = "anthropic"\nname = "claude-x"\n', "ANTHROPIC_API_KEY"),
    ({}, {}, '[model]\napi_key_env = "MY_KEY"\n', "MY_KEY"),
])
def test_a_model_or_provider_named_without_its_key_is_a_usage_error_naming_it(
        no_provider, home, kw, env, config, missing):
    for name, value in env.items():
        no_provider.setenv(name, value)
    if config:
        write_config(home, config)
    with pytest.raises(UsageError, match=f"{missing} is not set: export {missing}="):
        Agent(home=home, **kw).chat("hi")
    assert not (home / "sessions").exists()


def test_an_endpoint_and_key_without_a_model_asks_for_the_model(no_provider, home):
    no_provider.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    no_provider.setenv("OPENAI_API_KEY", "sk-config-test-key-000000")
    with pytest.raises(UsageError, match=r"no model name for openai at http://127\.0\.0\.1:9/v1: "
                                         "pass --model"):
        Agent(home=home)


def test_only_nothing_named_at_all_runs_the_embedded_model(no_provider, home):
    no_provider.setattr(settings_module, "local_endpoint",
                        lambda home, missing: ("tiny", lambda: "http://127.0.0.1:9/v1"))
    with Agent(home=home) as fallback, Agent(home=home, provider="local") as asked:
        assert (fallback.settings.provider, fallback.settings.model) == ("local", "tiny")
        assert (asked.settings.provider, asked.settings.model) == ("local", "tiny")
    with pytest.raises(UsageError, match="the embedded local model is 'tiny', not 'big'"):
        Agent(home=home, provider="local", model="big")


# --- settings no adapter could use, or no log could hold, are refused when built -------------

@pytest.mark.parametrize("kw, expected", [
    ({"base_url": "ftp://x"}, "base_url must be an http:// or https:// URL with a host, "
                              "got 'ftp://x'"),
    ({"base_url": "http://"}, "base_url must be an http:// or https:// URL"),
    ({"base_url": "https://user:hunter2hunter2@[::1/v1"}, "got '(unreadable URL)'"),
    ({"fallback_providers": [{"provider": "p", "model": "m", "base_url": "file:///etc"}]},
     "base_url must be an http:// or https:// URL with a host, got 'file:///etc'"),
    ({"model": "bad\udcff"}, r"model is not valid UTF-8 text: 'bad\udcff'"),
    ({"identity": "\udcfe"}, "identity is not valid UTF-8 text"),
    ({"cwd": "/tmp/\udcff"}, "cwd is not valid UTF-8 text"),
])
def test_an_unusable_endpoint_or_text_that_is_not_utf8_is_refused_before_any_file(
        home, kw, expected):
    kw.setdefault("base_url", URL)
    with pytest.raises(UsageError, match=re.escape(expected)):
        Agent(model=kw.pop("model", "m"), api_key="sk-config-test-key-000000", home=home,
              **kw).chat("hi")
    assert not (home / "sessions").exists()


class _BrokenClock(FakeClock):
    def now(self) -> str:
        raise RuntimeError("the clock broke")


def test_a_session_that_fails_to_start_leaves_no_log(home):
    with pytest.raises(RuntimeError, match="the clock broke"), \
            Agent(model="m", client=ScriptedModel("hi"), clock=_BrokenClock(),
                  home=home) as broken:
        broken.chat("hi")
    assert list((home / "sessions").iterdir()) == []


def test_provider_local_with_a_base_url_is_that_server_not_the_embedded_one() -> None:
    """A llama.cpp server of the caller's own (tests/realserver runs one with a small window):
    the embedded server starts only when no endpoint is given."""
    own = resolve_provider(provider="local", model="smollm2", base_url="http://127.0.0.1:9/v1",
                           api_key="k", env={})
    assert (own.provider, own.model, own.base_url, own.api_key) == (
        "local", "smollm2", "http://127.0.0.1:9/v1", "k")
    assert resolve_provider(provider="local", env={}).base_url == ""  # the embedded one
    with pytest.raises(UsageError, match="no model name for local"):
        resolve_provider(provider="local", base_url="http://127.0.0.1:9/v1", env={})


@pytest.mark.parametrize("change, message", SETTING_RULES)
def test_values_are_checked_by_the_rule_of_the_settings_they_are_for(change, message):
    """One rule per setting: the edge check says what building the settings would say."""
    with pytest.raises(UsageError) as at_the_edge:
        settings_module.check_session_values(change)
    with pytest.raises(UsageError) as when_built:
        SessionSettings(model="m", provider="p", **change)
    assert str(at_the_edge.value) == str(when_built.value)
    assert str(at_the_edge.value).startswith(message)


def test_a_fallback_entry_refused_by_its_rules_is_named():
    with pytest.raises(UsageError, match=r"^a fallback provider's context_length must be a "
                                         r"whole number of at least 1, got 0$"):
        provider_entry({"provider": "p", "model": "m", "context_length": 0})
