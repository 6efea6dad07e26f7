"""The ``mibyan`` command, run as a user would (a subprocess) against the fake server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from effects.eventlog import session_path
from tests.fake_openai import Reply

ROOT = Path(__file__).resolve().parents[2]


def mibyan(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MIBYAN_MODEL")}
    base["MIBYAN_HOME"] = str(home)
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=ROOT, env=base,
                          capture_output=True, text=True, timeout=60)


def test_run_resume_sessions_replay_verify_sql(server, home, tmp_path):
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    server.script(Reply.tool_calls([("read_file", f'{{"path": "{tmp_path / "notes.txt"}"}}')]),
                  Reply.text("It says 42."), Reply.text("Still 42."))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-test-key-0123456789"}
    first = mibyan(home, "run", "--model", "fake", "what does notes.txt say?", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "It says 42."
    assert "[tool] read_file -> ok" in first.stderr
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
    assert row[-3:-2] == ["2"]  # two turns

    replayed = mibyan(home, "replay", sid)
    assert replayed.returncode == 0 and replayed.stdout.startswith("identical (")

    verified = mibyan(home, "log", "verify", sid)
    assert verified.returncode == 0 and verified.stdout.startswith("ok:")

    counted = mibyan(home, "sql", "SELECT count(*) AS n FROM events WHERE kind = 'tool_ran'")
    assert counted.returncode == 0 and counted.stdout.splitlines()[1].strip() == "1"

    bad = mibyan(home, "sql", "SELECT * FROM nowhere")
    assert bad.returncode == 2 and "query failed" in bad.stderr


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
