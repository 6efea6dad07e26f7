"""The ``mibyan`` command, run as a user would (a subprocess) against the fake server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from effects.eventlog.store import read_envelopes, session_path
from tests.fake_anthropic import FakeAnthropicServer
from tests.fake_anthropic import Reply as AReply
from tests.fake_openai import FakeOpenAIServer, Reply

ROOT = Path(__file__).resolve().parents[2]


PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
                      "ANTHROPIC_BASE_URL", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL",
                      "MIBYAN_MODEL")


def clean_env(home: Path, env: dict | None = None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    base["MIBYAN_HOME"] = str(home)
    base.update(env or {})
    return base


def mibyan(home: Path, *args: str, env: dict | None = None,
           stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli.main", *args], cwd=ROOT,
                          env=clean_env(home, env), capture_output=True, text=True, timeout=60,
                          input=stdin, check=False)


def test_a_streamed_answer_continued_after_the_length_limit_is_shown_once(server, home):
    server.script(*[Reply.text(f"part {n}. ", finish_reason="length") for n in range(1, 5)])
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-test-key-0123456789"}
    done = mibyan(home, "run", "--model", "fake", "--no-tools", "go on", env=env)
    # Still cut off after three continuations: the turn did not complete, and the status says so.
    assert done.returncode == 1, done.stderr
    assert "did not complete (incomplete_response)" in done.stderr
    # Each continuation was streamed as it came; the cut answer is not printed again after it.
    assert done.stdout == "part 1. part 2. part 3. part 4. \n"


def test_a_streamed_answer_holding_a_secret_is_shown_once_already_masked(server, home):
    """The stream showed the secret, and then the masked answer printed again after it."""
    token = "ghp_Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ1234"
    server.script(Reply.text(f"Use {token} for the push.\nAuthorization: Basic "
                             "dXNlcjpwYXNzd29yZDEyMw==\nDone.", piece_size=3))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-test-key-0123456789"}
    done = mibyan(home, "run", "--model", "fake", "--no-tools", "the token?", env=env)
    assert done.returncode == 0, done.stderr
    assert token not in done.stdout and "dXNlcjpwYXNz" not in done.stdout
    assert done.stdout == ("Use ghp_Xk...1234 for the push.\nAuthorization: Basic dXNlcj...Mw==\n"
                           "Done.\n")


def test_a_short_configured_key_echoed_in_an_error_is_hidden_on_stderr_and_in_the_log(
        server, home):
    """Only keys of eight characters or more were hidden: a short one reached both."""
    key = "k3y-7ch"
    server.script(Reply.error(401, f"Incorrect API key provided: {key}. Find yours at x",
                              code="invalid_api_key"))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": key}
    done = mibyan(home, "run", "--model", "fake", "--no-tools", "hi", env=env)
    assert done.returncode != 0
    assert "HTTP 401" in done.stderr and key not in done.stderr
    logs = list((home / "sessions").rglob("*.jsonl"))
    assert logs and all(key not in path.read_text() for path in logs)


def test_run_resume_sessions_replay_verify_sql(server, home, tmp_path):
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    server.script(Reply.tool_calls([("read_file", f'{{"path": "{tmp_path / "notes.txt"}"}}')]),
                  Reply.text("It says 42."), Reply.text("Still 42."))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-test-key-0123456789"}
    first = mibyan(home, "run", "--model", "fake", "--workdir", str(tmp_path),
                   "what does notes.txt say?", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "It says 42."
    assert "[tool] read_file /" in first.stderr and " -> ok (" in first.stderr
    assert "tokens in" in first.stderr and "total" in first.stderr
    assert "the answer is 42" in server.requests[1]["messages"][-1]["content"]
    sid = first.stderr.split("[session ")[1].split(" ")[0]

    again = mibyan(home, "run", "--model", "fake", "--resume", sid, "--no-stream", "and now?",
                   env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "Still 42."

    listed = mibyan(home, "sessions")
    assert sid in listed.stdout and "fake" in listed.stdout and "(1 row)" in listed.stdout
    row = next(line for line in listed.stdout.splitlines() if line.startswith(sid)).split()
    assert row[3] == "2"  # two turns: session_id, started_at, model, turns, ...

    replayed = mibyan(home, "replay", sid)
    assert replayed.returncode == 0 and replayed.stdout.startswith("identical (")

    verified = mibyan(home, "log", "verify", sid)
    assert verified.returncode == 0 and verified.stdout.startswith("ok:")

    counted = mibyan(home, "sql", "SELECT count(*) AS n FROM events WHERE kind = 'tool_ran'")
    assert counted.returncode == 0 and counted.stdout.splitlines()[1].strip() == "1"

    bad = mibyan(home, "sql", "SELECT * FROM nowhere")
    assert bad.returncode == 2 and "query failed" in bad.stderr


def test_run_offers_the_built_in_toolsets_and_denies_dangerous_commands_unattended(
        server, home, tmp_path):
    server.script(Reply.tool_calls([("write_file", '{"path": "a.txt", "content": "hello"}'),
                                    ("terminal", '{"command": "rm -rf sub"}')]),
                  Reply.text("Wrote it."))
    (tmp_path / "sub").mkdir()
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-test-key-0123456789"}
    done = mibyan(home, "run", "--model", "fake", "--workdir", str(tmp_path), "--no-stream",
                  "write a.txt", env=env)
    assert done.returncode == 0, done.stderr
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"read_file", "write_file", "patch", "search_files", "terminal", "todo",
            "memory", "skill_view"} <= offered
    assert (tmp_path / "a.txt").read_text() == "hello"
    assert (tmp_path / "sub").is_dir()  # nobody at a terminal approved the recursive delete
    results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "approval" in results[1]["content"].lower() or "denied" in results[1]["content"]
    # Issue 25: the tool lines named the tool only; they now say what it was asked.
    assert "[tool] write_file a.txt -> ok" in done.stderr
    assert "[tool] terminal rm -rf sub" in done.stderr
    only_files = mibyan(home, "run", "--model", "fake", "--toolsets", "nope", "hi", env=env)
    assert only_files.returncode == 2 and "unknown toolset" in only_files.stderr


def test_replay_and_verify_report_a_tampered_log(server, home):
    server.script(Reply.text("fine"))
    env = {"OPENAI_BASE_URL": server.base_url, "MIBYAN_MODEL": "fake"}
    done = mibyan(home, "run", "hi", env=env)
    assert done.returncode == 0, done.stderr
    sid = done.stderr.split("[session ")[1].split(" ")[0]
    path = session_path(home / "sessions", sid)
    path.write_text(path.read_text().replace('"estimated_tokens":', '"estimated_tokens":1', 1))
    verified = mibyan(home, "log", "verify", sid)
    assert verified.returncode == 1 and "BROKEN" in verified.stdout
    missing = mibyan(home, "replay", "no_such_session")
    assert missing.returncode == 2 and "no session" in missing.stderr


def test_help_lists_the_commands(home):
    done = mibyan(home, "--help")
    assert done.returncode == 0
    for command in ("run", "sessions", "replay", "log", "sql"):
        assert command in done.stdout


# --- bad input is a clear usage error, before anything is logged ------------------------------

def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("args, expected", [
    (("--max-tokens", "0"), "--max-tokens: must be a whole number of at least 1, got '0'"),
    (("--max-turns", "-3"), "--max-turns: must be a whole number of at least 1"),
    (("--timeout", "-1"), "--timeout: must be a positive number of seconds, got '-1'"),
    (("--deadline", "0"), "--deadline: must be a positive number of seconds"),
])
def test_bad_numbers_are_usage_errors(home, args, expected):
    done = mibyan(home, "run", *args, "hi", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                                 "MIBYAN_MODEL": "fake"})
    assert done.returncode == 2 and expected in done.stderr
    no_traceback(done)
    assert not (home / "sessions").exists()


@pytest.mark.parametrize("config, expected", [
    ('model = "oops"\n', "model must be a table"),
    ("[model]\nname = 5\n", "[model] name must be a string, got 5"),
    ('[model]\ncredential_strategy = "random"\n', "unknown credential_strategy 'random'"),
    ("[model]\ntimeout = -1\n", "timeout must be a positive number of seconds, got -1"),
    ('[sandbox]\nmode = "open"\n', "[sandbox] mode: sandbox must be one of read-only"),
    ("[output]\nretries = -1\n", "[output] retries: output_retries must be a whole number"),
])
def test_a_bad_config_toml_is_a_usage_error(home, config, expected):
    home.mkdir()
    (home / "config.toml").write_text(config)
    done = mibyan(home, "run", "hi", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                          "MIBYAN_MODEL": "fake"})
    assert done.returncode == 2 and expected in done.stderr
    no_traceback(done)
    assert not (home / "sessions").exists()


def test_an_unwritable_home_is_a_usage_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = mibyan(tmp_path, "--home", str(blocker / "home"), "run", "hi",
                  env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "MIBYAN_MODEL": "fake"})
    assert done.returncode == 2 and "mibyan: cannot" in done.stderr
    no_traceback(done)


# --- the prompt from stdin, credentials in the URL, each provider's own variables -------------

def test_the_prompt_is_read_from_stdin_when_it_is_a_dash(server, home):
    prompt = "summarise this: " + "lorem ipsum " * 20_000  # past the 128 KB argument limit
    server.script(Reply.text("short"))
    done = mibyan(home, "run", "--model", "fake", "--no-tools", "-", stdin=prompt,
                  env={"OPENAI_BASE_URL": server.base_url})
    assert done.returncode == 0, done.stderr
    assert server.requests[0]["messages"][-1]["content"] == prompt
    empty = mibyan(home, "run", "--model", "fake", "-", stdin="  \n",
                   env={"OPENAI_BASE_URL": server.base_url})
    assert empty.returncode == 2 and "stdin held no prompt" in empty.stderr


def test_credentials_in_the_base_url_never_reach_the_log(server, home):
    server.script(Reply.text("fine"))
    url = server.base_url.replace("http://", "http://alice:pa55w0rd-in-the-url@")
    done = mibyan(home, "run", "--model", "fake", "--base-url", url, "hi")
    assert done.returncode == 0, done.stderr
    sid = done.stderr.split("[session ")[1].split(" ")[0]
    log = session_path(home / "sessions", sid).read_text()
    assert "pa55w0rd-in-the-url" not in log and "alice" not in log
    assert server.base_url in log
    assert len(server.requests) == 1


def test_anthropic_uses_its_own_base_url_and_ignores_openais(server, home):
    with FakeAnthropicServer() as anthropic:
        anthropic.script(AReply.text("from anthropic"))
        done = mibyan(home, "run", "--provider", "anthropic", "--model", "claude-fake",
                      "--no-stream", "hi",
                      env={"ANTHROPIC_BASE_URL": anthropic.base_url,
                           "ANTHROPIC_API_KEY": "sk-ant-cli-test-0123456789",
                           "OPENAI_BASE_URL": server.base_url})
        anthropic.assert_done()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from anthropic"
    assert server.requests == []


# --- SIGTERM interrupts the turn like Ctrl-C ----------------------------------------------------

class ArrivalServer(FakeOpenAIServer):
    """Tells when a request has arrived (so a test signals a process mid-call, not before)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Event()

    def _record(self, body, headers):
        try:
            return super()._record(body, headers)
        finally:
            self.arrived.set()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_interrupts_the_turn_cleanly_and_the_session_resumes(home, signum):
    env = {"MIBYAN_MODEL": "fake"}
    with ArrivalServer() as slow:
        slow.script(Reply.hang(30), Reply.text("resumed fine"))
        env["OPENAI_BASE_URL"] = slow.base_url
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli.main", "run", "slow question"], cwd=ROOT,
            env=clean_env(home, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert slow.arrived.wait(30), "the model call never reached the server"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 128 + signum, err
        no_traceback(subprocess.CompletedProcess(proc.args, proc.returncode, "", err))
        assert "interrupted_during_api_call" in err
        sid = err.split("[session ")[1].split(" ")[0]
        kinds = [e.kind for e in read_envelopes(session_path(home / "sessions", sid))]
        assert kinds[-2:] == ["interrupted", "turn_finished"]
        again = mibyan(home, "run", "--resume", sid, "and now?", env=env)
        slow.assert_done()
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "resumed fine"
    assert mibyan(home, "replay", sid).stdout.startswith("identical (")


def test_theusage_line_says_reasoning_counted_in_the_output_not_zero():
    from pipeline.cli.turn_lines import usage_line
    from stages.log.events import Usage
    result = {"session_id": "s", "model": "claude-x", "api_calls": 1, "rate_limits": None,
              "turn_exit_reason": "text_response(finish_reason=stop)",
              "usage": Usage(output_tokens=30, reasoning_in_output=True).as_dict()}
    assert "reasoning n/a (counted in out) total 30" in usage_line(result)
    result["usage"] = Usage(output_tokens=30, reasoning_tokens=7).as_dict()
    assert "reasoning 7 total 30" in usage_line(result)


def test_run_with_an_output_schema_prints_the_checked_json_answer(server, home, tmp_path):
    schema = tmp_path / "city.json"
    schema.write_text('{"type": "object", "properties": {"name": {"type": "string"}}, '
                      '"required": ["name"]}')
    server.script(Reply.text('{"nom": "Paris"}'), Reply.text('{"name": "Paris"}'))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-test-key-0123456789"}
    done = mibyan(home, "run", "--model", "fake", "--no-tools", "--output-schema", str(schema),
                  "capital of France?", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"name":"Paris"}\n'  # only the checked answer, not each attempt
    assert server.requests[0]["response_format"]["json_schema"]["schema"]["required"] == ["name"]
    bad = mibyan(home, "run", "--model", "fake", "--output-schema", str(tmp_path / "none.json"),
                 "hi", env=env)
    assert bad.returncode == 2 and "--output-schema" in bad.stderr and "cannot read" in bad.stderr
