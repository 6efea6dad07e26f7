"""Signed logs and one bad log in a home, as a user meets them (issue 24): a record forged
with its hash chain recomputed is refused, by its seq, by ``log verify``, ``replay``,
``run --resume`` and ``export`` (the gateway: ``serve/test_signed_sessions.py``); a log
moved to another home verifies once its key is imported; a 60 MB line in one log of a home
leaves ``sessions`` and ``export`` of the others whole, and names the bad log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from effects.eventlog.envelope import encode_line, line_hash
from effects.eventlog.store import session_path
from tests.fake_openai import Reply
from tests.pipeline.test_cli import mibyan

OFFLINE = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-offline-0123456789",
           "MIBYAN_MODEL": "fake"}
CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _run(home: Path, server, *answers: str) -> list[str]:
    server.script(*(Reply.text(answer) for answer in answers))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-test-key-0123456789",
           "MIBYAN_MODEL": "fake"}
    sids = []
    for answer in answers:
        done = mibyan(home, "run", "--no-tools", f"say {answer}", env=env)
        assert done.returncode == 0, done.stderr
        sids.append(done.stderr.split("[session ")[1].split(" ")[0])
    return sids


def _forged(kind: str, payload: dict) -> None:
    if kind == "session_started":
        payload["settings"]["model"] = "forged"
    elif kind == "model_replied":
        payload["message"]["content"] = "forged"
    else:
        payload["final_response"] = "forged"


def forge(path: Path, kind: str) -> int:
    """Put "forged" in the first record of ``kind`` (the model set, the model's answer, the
    turn's final answer) as a forger without the key would: the seals and the hash chain
    recomputed after it, the signatures (which cannot be) left as they were. The forged
    record's seq."""
    out, prev, forged = [], None, None
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        if obj["kind"] == kind and forged is None:
            forged = obj["seq"]
            _forged(kind, obj["payload"])
        raw = encode_line(obj["session_id"], obj["seq"], obj["kind"], obj["schema_version"],
                          obj["recorded_at"], prev or obj["prev_hash"], obj["payload"])
        out.append(raw[:-1] + f',"sig":"{obj["sig"]}"}}'.encode() if "sig" in obj else raw)
        prev = line_hash(out[-1])
    path.write_bytes(b"\n".join(out) + b"\n")
    assert forged is not None
    return forged


# session_started (its settings: model "fake"), the model's answer, the turn's final answer
POSITIONS = {"first": "session_started", "middle": "model_replied", "last": "turn_finished"}


@pytest.mark.parametrize("position", POSITIONS)
def test_a_forged_record_is_refused_by_every_reader_with_its_seq(server, home, tmp_path,
                                                                  position: str) -> None:
    [sid] = _run(home, server, "one")
    path = session_path(home / "sessions", sid)
    seq = forge(path, POSITIONS[position])
    if position == "last":
        assert seq == len(path.read_bytes().splitlines()) - 1
    forged = path.read_bytes()
    where = f"(seq {seq})"

    verified = mibyan(home, "log", "verify", sid)
    assert verified.returncode == 1 and "Traceback" not in verified.stderr
    assert f"line {seq + 1} {where}: the record fails its signature" in verified.stdout

    replayed = mibyan(home, "replay", sid)
    assert replayed.returncode == 1 and "identical" not in replayed.stdout
    assert where in replayed.stderr and "fails its signature" in replayed.stderr

    resumed = mibyan(home, "run", "--resume", sid, "and now?", env=OFFLINE)
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert where in resumed.stderr and "fails its signature" in resumed.stderr

    out = tmp_path / "out.jsonl"
    exported = mibyan(home, "export", str(out))
    assert exported.returncode == 0, exported.stderr
    assert "exported 0 sample(s)" in exported.stdout
    assert f"skipped {sid}: " in exported.stdout and where in exported.stdout
    assert "forged" not in out.read_text()

    listed = mibyan(home, "sessions")
    assert f"{sid}: seq {seq}: fails its signature" in listed.stderr
    assert path.read_bytes() == forged  # nothing cut, nothing appended


def test_a_moved_log_verifies_once_its_key_is_imported(server, home, tmp_path) -> None:
    [sid] = _run(home, server, "one")
    other = tmp_path / "other"
    (other / "sessions").mkdir(parents=True)
    shutil.copy(session_path(home / "sessions", sid), other / "sessions")

    refused = mibyan(other, "log", "verify", sid)
    assert refused.returncode == 1
    assert "which this home does not hold (import it with `mibyan log import-key FILE`)" \
        in refused.stdout
    replayed = mibyan(other, "replay", sid)
    assert replayed.returncode == 1 and "does not hold" in replayed.stderr

    key = tmp_path / "home.key"
    exported = mibyan(home, "log", "export-key", str(key))
    assert exported.returncode == 0, exported.stderr
    key_id = exported.stdout.split("signing key ")[1].split()[0]
    assert key.read_text().split()[-1] not in exported.stdout + exported.stderr
    imported = mibyan(other, "log", "import-key", str(key))
    assert imported.returncode == 0 and f"imported key {key_id}" in imported.stdout

    verified = mibyan(other, "log", "verify", sid)
    assert verified.returncode == 0
    assert verified.stdout.startswith("ok: ") and f"signed (key {key_id})" in verified.stdout
    assert "identical" in mibyan(other, "replay", sid).stdout


def test_old_logs_are_listed_and_verified_as_unsigned(home: Path) -> None:
    sessions = home / "sessions"
    sessions.mkdir(parents=True)
    old = sorted((CORPUS / "v3").glob("*.jsonl"))[:2]
    for log in old:
        shutil.copy(log, sessions)
    listed = mibyan(home, "sessions")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:-1]]
    assert sorted((row[0], row[-1]) for row in rows) == [(p.stem, "unsigned") for p in old]
    verified = mibyan(home, "log", "verify", old[0].stem)
    assert verified.returncode == 0
    assert "unsigned (written before logs were signed)" in verified.stdout


@pytest.mark.parametrize("newline", [True, False], ids=["inside", "at-the-end"])
def test_a_60_mb_line_in_one_log_leaves_the_others_listed_and_exported(server, home, tmp_path,
                                                                       newline: bool) -> None:
    sids = _run(home, server, "one", "two", "three")
    bad = session_path(home / "sessions", sids[1])
    lines = bad.read_bytes().splitlines(keepends=True)
    torn = b'{"session_id":"' + sids[1].encode() + b'","payload":"' + b"a" * 60_000_000
    bad.write_bytes(b"".join(lines[:2]) + torn + (b"\n" + b"".join(lines[2:]) if newline else b""))

    listed = mibyan(home, "sessions")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:-1]}
    assert rows[sids[0]][-1] == rows[sids[2]][-1] == "signed"
    assert rows[sids[1]][-1] == "broken"
    assert f"{sids[1]}: seq 2: the record is longer than a record may be" in listed.stderr

    out = tmp_path / "out.jsonl"
    exported = mibyan(home, "export", str(out))
    assert exported.returncode == 0, exported.stderr
    assert "exported 2 sample(s) from 2 session(s)" in exported.stdout
    assert f"skipped {sids[1]}: " in exported.stdout and "(seq 2)" in exported.stdout
    samples = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(s["provenance"]["session_id"] for s in samples) == [sids[0], sids[2]]
