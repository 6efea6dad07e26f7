"""Where settings come from: flags, then the environment, then config.toml."""

from __future__ import annotations

import pytest

from pipeline.config import provider_entry, resolve_provider
from stages.errors import ProviderNotConfiguredError, UsageError


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
    with pytest.raises(ProviderNotConfiguredError, match="no model name"):
        resolve_provider(base_url="http://localhost:8080/v1", env={})


def test_fallback_entries_resolve_their_api_mode_and_key_label():
    entry = provider_entry({"provider": "anthropic", "model": "claude-x",
                            "key_env": "ANTHROPIC_API_KEY"})
    assert (entry.api_mode, entry.base_url, entry.credentials) == (
        "anthropic_messages", "https://api.anthropic.com", ("ANTHROPIC_API_KEY",))
    with pytest.raises(UsageError, match="provider and model"):
        provider_entry({"model": "x"})
