"""The conventions people bring from other tools (issue 25): ``.env`` files, the SDKs' other
variables, and a word about a config table mibyan does not read. The CLI runs as a user runs
it (a subprocess) against the loopback fakes."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from pipeline import config as cfg
from tests.fake_anthropic import FakeAnthropicServer
from tests.fake_anthropic import Reply as AReply
from tests.fake_openai import Reply
from tests.pipeline.test_cli import ROOT, clean_env


def _run(home: Path, cwd: Path, *args: str, env: dict | None = None):
    return subprocess.run([sys.executable, "-m", "pipeline.cli.main", *args], cwd=cwd,
                          env={**clean_env(home, env), "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_dotenv_file_in_the_working_directory_names_the_provider(server, home, tmp_path):
    # Before: the .env was ignored and the run fell back to the embedded local model.
    server.script(Reply.text("from the dotenv provider"))
    (tmp_path / ".env").write_text(f"OPENAI_BASE_URL={server.base_url}\n"
                                   "OPENAI_API_KEY=sk-dotenv-test-0123456789abcdef\n"
                                   "MIBYAN_MODEL=fake\n")
    done = _run(home, tmp_path, "run", "--no-tools", "--no-stream", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from the dotenv provider"
    assert "embedded local model" not in done.stderr
    [headers] = server.request_headers
    assert headers["authorization"] == "Bearer sk-dotenv-test-0123456789abcdef"


def test_the_environment_wins_over_dotenv_and_the_cwd_file_over_the_home_one(
        server, home, tmp_path):
    server.script(Reply.text("ok"))
    home.mkdir(parents=True)
    (home / ".env").write_text("MIBYAN_MODEL=from-home\nOPENAI_API_KEY=sk-home-0123456789ab\n")
    (tmp_path / ".env").write_text(f"OPENAI_BASE_URL={server.base_url}\nMIBYAN_MODEL=from-cwd\n")
    done = _run(home, tmp_path, "run", "--no-tools", "--no-stream", "hi",
                env={"OPENAI_API_KEY": "sk-exported-0123456789ab"})
    assert done.returncode == 0, done.stderr
    assert server.last_request["model"] == "from-cwd"
    [headers] = server.request_headers
    assert headers["authorization"] == "Bearer sk-exported-0123456789ab"


def test_openai_org_and_project_variables_are_sent_as_the_sdk_sends_them(server, home, tmp_path):
    server.script(Reply.text("ok"))
    done = _run(home, tmp_path, "run", "--model", "fake", "--no-tools", "hi",
                env={"OPENAI_BASE_URL": server.base_url, "OPENAI_ORG_ID": "org-test123",
                     "OPENAI_PROJECT_ID": "proj_test456"})
    assert done.returncode == 0, done.stderr
    [headers] = server.request_headers
    assert headers["openai-organization"] == "org-test123"
    assert headers["openai-project"] == "proj_test456"


def test_anthropic_auth_token_is_sent_as_a_bearer_token(home, tmp_path):
    with FakeAnthropicServer() as anthropic:
        anthropic.script(AReply.text("from anthropic"))
        done = _run(home, tmp_path, "run", "--provider", "anthropic", "--model", "claude-fake",
                    "--no-tools", "--no-stream", "hi",
                    env={"ANTHROPIC_BASE_URL": anthropic.base_url,
                         "ANTHROPIC_AUTH_TOKEN": "gw-token-0123456789abcdef"})
        anthropic.assert_done()
        [headers] = anthropic.request_headers
    assert done.returncode == 0, done.stderr
    assert headers["authorization"] == "Bearer gw-token-0123456789abcdef"
    assert "x-api-key" not in headers
    assert "gw-token-0123456789abcdef" not in done.stderr


def test_an_unknown_config_table_is_named_with_what_was_meant(tmp_path, caplog):
    (tmp_path / "config.toml").write_text('[modle]\nname = "gpt-4o-mini"\n')
    with caplog.at_level(logging.WARNING):
        cfg.load_file(tmp_path)
    assert "unknown section [modle]" in caplog.text and "did you mean [model]" in caplog.text


def test_every_table_mibyan_reads_is_known(tmp_path, caplog):
    (tmp_path / "config.toml").write_text(
        '[model]\nname = "m"\n[context]\n[local]\n[serve]\n[prices]\n[sandbox]\n'
        'mode = "read-only"\n[[fallback_providers]]\nprovider = "openai"\nmodel = "m"\n')
    with caplog.at_level(logging.WARNING):
        cfg.load_file(tmp_path)
    assert "unknown section" not in caplog.text


def test_log_lines_are_json_on_request(home, tmp_path):
    # Issue 25: log lines were key=value only; a log pipeline wants JSON.
    import json
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[modle]\nname = "x"\n')
    done = _run(home, tmp_path, "insights", "--json", env={"MIBYAN_LOG_FORMAT": "json"})
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert line["event"] == "config.unknown_section" and line["level"] == "warning"
    assert "did you mean [model]" in line["detail"] and line["timestamp"].startswith("20")
    plain = _run(home, tmp_path, "insights", "--json")
    assert "event='config.unknown_section'" in plain.stderr
