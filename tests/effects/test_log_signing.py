"""Signed event logs (issue 24): each record carries an HMAC under its home's key, so a forged
record is found even when its forger recomputed the hash chain; a log moved to another home
verifies once its key is imported; a huge line is a problem of its log, read with a bound."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from effects.eventlog.envelope import FIRST_KIND, MAX_LINE, encode_line, line_hash
from effects.eventlog.keys import export_key, import_key, keyring_of
from effects.eventlog.store import SessionLog, read_envelopes, session_path, verify
from stages.errors import LogCorruptError, UsageError

T0 = "2026-01-01T00:00:00Z"


def write_log(root: Path, session_id: str = "s1", records: int = 5) -> Path:
    with SessionLog.open(root, session_id, durability="flush") as log:
        log.append(FIRST_KIND, 1, {"n": 0}, T0)
        for n in range(1, records):
            log.append("model_replied", 1, {"text": f"answer {n}"}, T0)
    return log.path


def forge(path: Path, seq: int, payload: dict) -> None:
    """Change record ``seq`` as a forger without the key would: the hash chain and every seal
    recomputed after it, the signatures (which cannot be recomputed) left as they were."""
    out, prev = [], None
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        if obj["seq"] == seq:
            obj["payload"] = payload
        raw = encode_line(obj["session_id"], obj["seq"], obj["kind"], obj["schema_version"],
                          obj["recorded_at"], prev or obj["prev_hash"], obj["payload"])
        if "sig" in obj:
            raw = raw[:-1] + f',"sig":"{obj["sig"]}"}}'.encode()
        out.append(raw)
        prev = line_hash(raw)
    path.write_bytes(b"\n".join(out) + b"\n")


def test_the_home_key_is_private_and_made_once(tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    write_log(root, "a")
    keys = tmp_path / "home" / "keys"
    key_file = keys / "signing.key"
    assert stat.S_IMODE(os.stat(keys).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    before = key_file.read_bytes()
    write_log(root, "b")
    assert key_file.read_bytes() == before
    assert verify(session_path(root, "a")).key_ids == verify(session_path(root, "b")).key_ids
    # Neither the secret nor its hex ever reaches a log line.
    secret = before.split()[-1]
    assert secret not in session_path(root, "a").read_bytes()


@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_a_forged_record_with_a_recomputed_chain_is_named_by_its_seq(tmp_path: Path,
                                                                     position: str) -> None:
    root = tmp_path / "home" / "sessions"
    path = write_log(root)
    seq = {"first": 0, "middle": 2, "last": 4}[position]
    forge(path, seq, {"text": "forged"} if seq else {"n": 99})
    forged = path.read_bytes()

    report = verify(path)
    assert not report.ok
    assert report.problems[0] == (f"line {seq + 1} (seq {seq}): the record fails its signature "
                                  "(forged, or changed after it was signed)")
    with pytest.raises(LogCorruptError, match=rf"line {seq + 1} \(seq {seq}\).*signature"):
        list(read_envelopes(path))
    with pytest.raises(LogCorruptError, match=rf"\(seq {seq}\).*signature"):
        SessionLog.open(root, "s1")
    assert path.read_bytes() == forged  # nothing cut, nothing appended


def test_a_stripped_signature_is_named(tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    path = write_log(root)
    lines = path.read_bytes().splitlines()
    obj = json.loads(lines[3])
    # The forger re-seals the record without its signature (the chain still links).
    lines[3] = encode_line(obj["session_id"], obj["seq"], obj["kind"], obj["schema_version"],
                           obj["recorded_at"], obj["prev_hash"], {"text": "forged"})
    path.write_bytes(b"\n".join(lines[:4]) + b"\n")
    report = verify(path)
    assert report.problems == ("line 4 (seq 3): the record has no 'sig' although the records "
                               "before it are signed (its signature was stripped)",)


def test_a_moved_log_verifies_once_its_key_is_imported(tmp_path: Path) -> None:
    here, there = tmp_path / "here" / "sessions", tmp_path / "there" / "sessions"
    path = write_log(here)
    there.mkdir(parents=True)
    moved = session_path(there, "s1")
    moved.write_bytes(path.read_bytes())
    write_log(there, "own")  # the other home has a key of its own

    [key_id] = verify(path).key_ids
    report = verify(moved)
    assert not report.ok and report.problems[0] == (
        f"line 1 (seq 0): the record is signed with key {key_id}, which this home does not "
        "hold (import it with `mibyan log import-key FILE`)")
    with pytest.raises(LogCorruptError, match=f"signed with key {key_id}"):
        list(read_envelopes(moved))

    exported = tmp_path / "here.key"
    assert export_key(here, exported) == key_id
    assert stat.S_IMODE(os.stat(exported).st_mode) == 0o600
    with pytest.raises(UsageError, match="exists"):
        export_key(here, exported)
    assert import_key(there, exported) == key_id
    assert verify(moved).ok and verify(moved).signature == "signed"
    assert len(list(read_envelopes(moved))) == 5
    # The moved log goes on under its new home's key: partly signed by each, still whole.
    with SessionLog.open(there, "s1", durability="flush") as log:
        log.append("model_replied", 1, {"text": "here now"}, T0)
    assert verify(moved).ok and len(verify(moved).key_ids) == 2


def test_a_key_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.key"
    bad.write_text("mibyan-log-key 1 nothex\n")
    with pytest.raises(UsageError, match="is not a mibyan log key"):
        import_key(tmp_path / "home" / "sessions", bad)


def test_an_unsigned_log_is_reported_unsigned_not_broken(tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    unsigned = keyring_of(root)  # no key: a writer from before logs were signed
    with SessionLog.open(root, "old", durability="flush", keyring=unsigned) as log:
        log.append(FIRST_KIND, 1, {}, T0)
        log.append("model_replied", 1, {"text": "hi"}, T0)
    report = verify(session_path(root, "old"))
    assert report.ok and report.signature == "unsigned" and report.signed == 0
    # Resumed by a writer that signs: its new records are signed, the log reads whole.
    with SessionLog.open(root, "old", durability="flush") as log:
        log.append("session_resumed", 1, {}, T0)
    report = verify(session_path(root, "old"))
    assert report.ok and report.signature == "partly signed" and report.signed == 1


@pytest.mark.parametrize("newline", [True, False], ids=["inside", "at-the-end"])
def test_a_line_over_the_bound_is_a_problem_of_its_log(tmp_path: Path, newline: bool) -> None:
    root = tmp_path / "home" / "sessions"
    path = write_log(root, records=3)
    huge = b'{"session_id":"s1","payload":"' + b"a" * (MAX_LINE + 10)
    with open(path, "ab") as fh:
        fh.write(huge + b"\n" * newline)
    report = verify(path)
    assert not report.ok and not report.torn_tail
    assert report.problems[0] == (f"line 4 (seq 3): the record is {len(huge) + newline:,} "
                                  f"bytes long, more than a record may be ({MAX_LINE:,} bytes)")
    with pytest.raises(LogCorruptError, match=r"line 4 \(seq 3\)"):
        SessionLog.open(root, "s1")


def test_a_writer_refuses_a_record_no_reader_would_take(tmp_path: Path) -> None:
    with SessionLog.open(tmp_path / "home" / "sessions", "big", durability="flush") as log:
        log.append(FIRST_KIND, 1, {}, T0)
        with pytest.raises(UsageError, match="longer than a log line may be"):
            log.append("tool_ran", 1, {"output": "x" * MAX_LINE}, T0)
        assert log.next_seq == 1


def test_the_signature_is_hmac_sha256_of_the_seal(tmp_path: Path) -> None:
    """The keyed states taken once give what the standard library's HMAC gives."""
    import hashlib
    import hmac

    root = tmp_path / "home" / "sessions"
    path = write_log(root, records=2)
    key = keyring_of(root, create=True).signing
    assert key is not None
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        key_id, mac = obj["sig"].split(":")
        assert key_id == key.key_id.decode()
        expected = hmac.new(key.secret, obj["hash"].encode(), hashlib.sha256).hexdigest()
        assert mac == expected
    assert "secret" not in repr(key) and key.secret.hex() not in repr(key)
