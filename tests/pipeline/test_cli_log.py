"""``mibyan log verify``, ``replay``, ``run --resume`` and ``sql`` on broken logs and hostile
queries, run as a user would: clear errors, no tracebacks, nothing changed (issue 8)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from effects.eventlog.store import session_path
from tests.fake_openai import Reply
from tests.pipeline.test_cli import mibyan

OFFLINE = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-offline-0123456789",
           "MIBYAN_MODEL": "fake"}


def _clean(done: subprocess.CompletedProcess, status: int) -> None:
    assert done.returncode == status, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout


def _session(home: Path, data: bytes, sid: str = "20260101_000000_abcdef") -> Path:
    path = session_path(home / "sessions", sid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("data", "problem"), [
    (b"", "no complete record"),
    (b"garbage\n", "does not parse"),
    (b"\x00\x01 binary garbage", "no complete record"),
], ids=["empty", "garbage", "garbage-no-newline"])
def test_an_empty_or_garbage_log_is_reported_refused_and_never_resumed(home: Path, data: bytes,
                                                                       problem: str) -> None:
    path = _session(home, data)
    sid = path.stem

    verified = mibyan(home, "log", "verify", sid)
    _clean(verified, 1)
    assert verified.stdout.startswith(f"BROKEN: {path}: 0 good records")
    [problem_line] = verified.stdout.splitlines()[1:]
    assert problem_line.startswith("  line 1 (seq 0): ") and problem in problem_line

    replayed = mibyan(home, "replay", sid)
    _clean(replayed, 1)
    assert "identical" not in replayed.stdout
    assert f"mibyan: LogCorruptError: event log {path}" in replayed.stderr
    assert "line 1 (seq 0)" in replayed.stderr

    resumed = mibyan(home, "run", "--resume", sid, "hello", env=OFFLINE)
    _clean(resumed, 1)
    assert "[session None" not in resumed.stderr
    assert f"mibyan: LogCorruptError: event log {path}" in resumed.stderr
    if data.endswith(b"\n") or not data:
        assert path.read_bytes() == data  # corruption is kept for a person to look at


def test_an_edited_last_record_is_reported_and_not_sealed_in_by_a_resume(server, home) -> None:
    server.script(Reply.text("fine"))
    done = mibyan(home, "run", "hi", env={"OPENAI_BASE_URL": server.base_url,
                                          "MIBYAN_MODEL": "fake"})
    _clean(done, 0)
    sid = done.stderr.split("[session ")[1].split(" ")[0]
    path = session_path(home / "sessions", sid)
    lines = path.read_bytes().splitlines(keepends=True)
    edited = lines[-1].replace(b'"recorded_at":"2', b'"recorded_at":"3', 1)
    assert edited != lines[-1]
    corrupted = b"".join(lines[:-1]) + edited
    path.write_bytes(corrupted)
    last = len(lines) - 1

    verified = mibyan(home, "log", "verify", sid)
    _clean(verified, 1)
    assert f"line {last + 1} (seq {last}): the record fails its own hash" in verified.stdout

    replayed = mibyan(home, "replay", sid)
    _clean(replayed, 1)
    assert f"line {last + 1} (seq {last})" in replayed.stderr

    resumed = mibyan(home, "run", "--resume", sid, "and now?", env=OFFLINE)
    _clean(resumed, 1)
    assert f"LogCorruptError: event log {path}" in resumed.stderr
    assert path.read_bytes() == corrupted  # nothing cut, nothing appended


@pytest.mark.parametrize(("query", "status", "message"), [
    ("", 2, "mibyan: empty query"),
    ("   ", 2, "mibyan: empty query"),
    ("SELEC 1", 2, "mibyan: query failed: Parser Error: syntax error"),
    ("SELECT * FROM read_text('/etc/passwd')", 2, "mibyan: query refused: "),
    ("SET enable_external_access = true", 2, "mibyan: query refused: "),
])
def test_sql_errors_are_one_line(home: Path, query: str, status: int, message: str) -> None:
    done = mibyan(home, "sql", query)
    _clean(done, status)
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1
    assert "root:" not in done.stdout


def test_sql_cannot_write_over_a_session_log(home: Path) -> None:
    path = _session(home, b"")
    done = mibyan(home, "sql", f"COPY (SELECT 1 AS x) TO '{path}' (FORMAT csv)")
    _clean(done, 2)
    assert "query refused" in done.stderr and path.read_bytes() == b""


def test_log_verify_reads_every_payload_through_the_codec(home: Path) -> None:
    """A payload the codec refuses (a status as text) chains and seals fine: verify said ok
    while replay and resume refused the session for ever."""
    from effects.eventlog.codec import to_payload
    from effects.eventlog.store import SessionLog
    from stages.log import events as ev
    sid = "20260101_000000_fedcba"
    started = ev.SessionStarted(session_id=sid, started_at="t",
                                settings=ev.SessionSettings(model="m", provider="p"))
    with SessionLog.open(home / "sessions", sid, durability="flush") as log:
        log.append(started.kind, started.schema_version, to_payload(started), "t")
        log.append("model_failed", 2, {"error_type": "ProviderHTTPError", "message": "boom",
                                       "status": "500"}, "t")
    done = mibyan(home, "log", "verify", sid)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "BROKEN" in done.stdout and "seq 1" in done.stdout and "model_failed" in done.stdout
