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
