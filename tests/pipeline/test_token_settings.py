"""``record_tokens``: from config.toml, from the command line, kept by a resumed session."""

from __future__ import annotations

import pytest

from pipeline.cli.main import _parser
from pipeline.settings import configure
from stages.errors import UsageError


def _config(home, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_config_toml_turns_recording_on_and_an_argument_wins(tmp_path):
    _config(tmp_path, "[model]\nrecord_tokens = true\n")
    given = {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": "k", "home": tmp_path}
    assert configure(**given).settings.record_tokens
    assert not configure(**given, record_tokens=False).settings.record_tokens
    _config(tmp_path, "")
    assert not configure(**given).settings.record_tokens


def test_a_record_tokens_that_is_no_boolean_is_a_usage_error(tmp_path):
    _config(tmp_path, '[model]\nrecord_tokens = "yes"\n')
    with pytest.raises(UsageError, match=r"record_tokens.*true or false"):
        configure(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", home=tmp_path)


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"], ["batch", "p.jsonl", "--out", "o"]])
def test_run_chat_and_batch_take_record_tokens(command):
    assert _parser().parse_args([*command, "--record-tokens"]).record_tokens is True
    assert _parser().parse_args(command).record_tokens is None


def test_the_tokenizer_comes_from_config_toml_or_an_argument_and_is_checked(tmp_path):
    given = {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": "k", "home": tmp_path}
    _config(tmp_path, '[tokens]\ntokenizer = "org/from-file"\n')
    assert configure(**given).settings.tokenizer == "org/from-file"
    # Not recording: the tokenizer is kept but never loaded (no Hub here, no error).
    assert configure(**given, tokenizer="org/given").settings.tokenizer == "org/given"
    _config(tmp_path, "[tokens]\ntokenizer = 3\n")
    with pytest.raises(UsageError, match=r"\[tokens\] tokenizer must be a name"):
        configure(**given)
    _config(tmp_path, '[tokens]\ntokeniser = "x"\n')
    with pytest.raises(UsageError, match=r"unknown setting \[tokens\] tokeniser"):
        configure(**given)


def test_a_recording_session_loads_its_tokenizer_before_it_starts(tmp_path):
    with pytest.raises(UsageError, match=r"tokenizer .*could not be loaded"):
        configure(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", home=tmp_path,
                  record_tokens=True, tokenizer=str(tmp_path / "missing.gguf"))


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"], ["batch", "p.jsonl", "--out", "o"]])
def test_run_chat_and_batch_take_a_tokenizer(command):
    assert _parser().parse_args([*command, "--tokenizer", "org/tok"]).tokenizer == "org/tok"
    assert _parser().parse_args(command).tokenizer is None
