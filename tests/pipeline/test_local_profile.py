"""What run and chat offer the embedded model (issue 25): the bundled 135M model gets no
tools unless asked; a larger GGUF file, a hosted provider or an explicit --toolsets gets them.
Nothing here starts a model: the choice is made before the agent opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from effects.local.model_file import local_settings
from pipeline.cli.local_profile import TOOLS_OFF_NOTICE, offered_toolsets, runs_embedded
from pipeline.cli.main import _parser
from pipeline.toolsets import DEFAULT_TOOLSETS
from stages.errors import UsageError


@pytest.fixture(autouse=True)
def no_provider(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MIBYAN_MODEL", "ANTHROPIC_API_KEY",
                 "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _args(home: Path, *argv: str):
    return _parser().parse_args(["--home", str(home), "run", *argv, "hello"])


def test_the_bundled_model_is_offered_no_tools_and_the_user_is_told(tmp_path, capsys):
    args = _args(tmp_path)
    assert runs_embedded(args)
    assert offered_toolsets(args, True) is None
    assert TOOLS_OFF_NOTICE in capsys.readouterr().err


def test_toolsets_named_on_the_command_line_are_offered_even_to_the_bundled_model(tmp_path):
    assert offered_toolsets(_args(tmp_path, "--toolsets", "files"), True) == ("files",)


def test_no_tools_means_none_whatever_the_model(tmp_path):
    assert offered_toolsets(_args(tmp_path, "--no-tools"), False) is None


def test_a_larger_local_model_file_is_offered_the_default_toolsets(tmp_path):
    (tmp_path / "config.toml").write_text('[local]\nmodel_path = "/models/qwen.gguf"\n')
    assert local_settings(tmp_path).offers_tools
    assert offered_toolsets(_args(tmp_path), True) == DEFAULT_TOOLSETS


def test_local_tools_setting_overrides_the_default(tmp_path):
    (tmp_path / "config.toml").write_text("[local]\ntools = true\n")
    assert offered_toolsets(_args(tmp_path), True) == DEFAULT_TOOLSETS
    (tmp_path / "config.toml").write_text("[local]\ntools = 1\n")
    with pytest.raises(UsageError, match=r"tools .* must be a bool"):
        local_settings(tmp_path)


def test_a_hosted_provider_is_not_the_embedded_model_and_gets_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-000000000000")
    args = _args(tmp_path, "--model", "gpt-4o-mini")
    assert not runs_embedded(args)
    assert offered_toolsets(args, False) == DEFAULT_TOOLSETS


def test_provider_local_by_name_is_the_embedded_model(tmp_path):
    assert runs_embedded(_args(tmp_path, "--provider", "local"))


def test_the_chat_offers_the_bundled_model_no_tools_either(tmp_path):
    from pipeline.cli.cmd_chat import options_from
    args = _parser().parse_args(["--home", str(tmp_path), "chat"])
    assert options_from(args).no_tools
    args = _parser().parse_args(["--home", str(tmp_path), "chat", "--toolsets", "files"])
    options = options_from(args)
    assert not options.no_tools and options.toolsets == ("files",)
