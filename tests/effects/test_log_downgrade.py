"""A signed log never passes as an unsigned one (issue 24): stripping its signatures and
recomputing its hash chain is named, with the session and the seq, by every reader, because
the home notes the sessions it signs (``effects.eventlog.signed_sessions``); a home can also
require signatures outright. Logs from before signing still read as unsigned."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from effects.eventlog.envelope import FIRST_KIND, encode_line, line_hash, strict_lines
from effects.eventlog.keys import REQUIRE_SIGNED_ENV, export_key, import_key, keyring_of
from effects.eventlog.store import SessionLog, read_envelopes, session_path, verify
from pipeline.cli.main import main
from pipeline.config import load_file
from pipeline.insights import log_scan
from stages.errors import LogCorruptError, UsageError
from tests.effects.test_log_signing import T0, write_log

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "v3"
STRIPPED = ("has no 'sig', but this home signed session 's1' from seq {seq} on "
            "(its signatures were stripped)")


def strip(path: Path, *, keep: int | None = None, only: int | None = None) -> None:
    """Rewrite the log as a forger without the key would: the signatures taken off (every
    one, or record ``only``'s), the records after ``keep`` cut, the hash chain made anew."""
    out, prev = [], None
    for line in path.read_bytes().splitlines()[:keep]:
        obj = json.loads(line)
        raw = encode_line(obj["session_id"], obj["seq"], obj["kind"], obj["schema_version"],
                          obj["recorded_at"], prev or obj["prev_hash"], obj["payload"])
        if "sig" in obj and only is not None and obj["seq"] != only:
            raw = raw[:-1] + f',"sig":"{obj["sig"]}"}}'.encode()
        out.append(raw)
        prev = line_hash(raw)
    path.write_bytes(b"\n".join(out) + b"\n")


def unsigned_log(root: Path, session_id: str, records: int) -> Path:
    """A log as a writer from before logs were signed made it."""
    with SessionLog.open(root, session_id, durability="flush", keyring=keyring_of(root)) as log:
        log.append(FIRST_KIND, 1, {}, T0)
        for n in range(1, records):
            log.append("model_replied", 1, {"text": f"old {n}"}, T0)
    return log.path


def every_reader_refuses(root: Path, session_id: str, seq: int, why: str) -> None:
    """verify, replay's reader, --resume's writer, export's reader and the insights index
    (``sessions``, ``sql``, the gateway's listing) each name the session, the seq and why."""
    path = session_path(root, session_id)
    report = verify(path)
    assert not report.ok and report.problems[0].startswith(f"line {seq + 1} (seq {seq}): ")
    assert why in report.problems[0]
    named = rf"session '{session_id}' is corrupt at line {seq + 1} \(seq {seq}\)"
    with pytest.raises(LogCorruptError, match=named):
        list(read_envelopes(path))
    with pytest.raises(LogCorruptError, match=named):
        SessionLog.open(root, session_id)
    with open(path, "rb") as fh, pytest.raises(LogCorruptError, match=named):
        list(strict_lines(fh, session_id, path, keyring_of(root)))
    with open(path, "rb") as fh:
        found = log_scan.scan(fh, session_id, log_scan.Position(), keyring_of(root))
    assert found.problem is not None and found.problem.startswith(f"seq {seq}: ")
    assert why in found.problem


def test_a_log_stripped_of_every_signature_is_named_not_unsigned(tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    path = write_log(root, records=4)
    strip(path)
    assert b'"sig"' not in path.read_bytes()
    every_reader_refuses(root, "s1", 0, STRIPPED.format(seq=0))


def test_a_one_record_log_stripped_of_its_signature_is_named(tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    path = write_log(root, records=1)
    strip(path, only=0)
    every_reader_refuses(root, "s1", 0, STRIPPED.format(seq=0))


def test_one_stripped_record_is_named_with_its_seq(tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    path = write_log(root, records=4)
    strip(path, keep=3, only=2)  # the last record left, its signature gone
    every_reader_refuses(root, "s1", 2, "its signature was stripped")


def test_a_truncated_log_stays_signed_and_truncated_and_stripped_is_named(
        tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    path = write_log(root, records=5)
    whole = path.read_bytes()
    path.write_bytes(b"".join(whole.splitlines(keepends=True)[:2]))
    assert verify(path).ok and verify(path).signature == "signed"
    path.write_bytes(whole)
    strip(path, keep=2)
    every_reader_refuses(root, "s1", 0, STRIPPED.format(seq=0))


def test_an_old_unsigned_log_reads_unsigned_and_its_signed_part_cannot_be_stripped(
        tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    path = unsigned_log(root, "s1", 3)
    report = verify(path)
    assert report.ok and report.signature == "unsigned"
    with SessionLog.open(root, "s1", durability="flush") as log:  # resumed by a signer
        log.append("session_resumed", 1, {}, T0)
        log.append("model_replied", 1, {"text": "new"}, T0)
    assert verify(path).ok and verify(path).signature == "partly signed"
    strip(path)
    every_reader_refuses(root, "s1", 3, STRIPPED.format(seq=3))


def test_a_moved_log_verifies_once_its_key_is_imported_and_is_guarded_once_resumed(
        tmp_path: Path) -> None:
    here, there = tmp_path / "here" / "sessions", tmp_path / "there" / "sessions"
    path = write_log(here, records=3)
    there.mkdir(parents=True)
    moved = Path(shutil.copy(path, there))
    assert not verify(moved).ok
    export_key(here, tmp_path / "here.key")
    import_key(there, tmp_path / "here.key")
    assert verify(moved).ok and verify(moved).signature == "signed"
    with SessionLog.open(there, "s1", durability="flush") as log:  # the new home signs on
        log.append("model_replied", 1, {"text": "there"}, T0)
    assert verify(moved).ok
    strip(moved)
    every_reader_refuses(there, "s1", 3, STRIPPED.format(seq=3))


def test_a_note_edited_to_excuse_the_stripped_records_makes_every_record_need_one(
        tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    path = write_log(root, records=3)
    note = tmp_path / "home" / "keys" / "signed" / "s1"
    head, _, rest = note.read_text().partition(" 0 ")
    note.write_text(f"{head} 99 {rest}")  # signed from seq 99 on: the mac no longer fits
    strip(path)
    every_reader_refuses(root, "s1", 0, "note that it signed the session")


@pytest.mark.parametrize("how", ["config", "environment"])
def test_a_home_that_requires_signatures_refuses_an_old_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    root = tmp_path / "home" / "sessions"
    unsigned_log(root, "old", 2)
    assert verify(session_path(root, "old")).ok
    if how == "config":
        (tmp_path / "home" / "config.toml").write_text("[logs]\nrequire_signed = true\n")
    else:
        monkeypatch.setenv(REQUIRE_SIGNED_ENV, "1")
    every_reader_refuses(root, "old", 0, "has no 'sig', but this home requires signed logs "
                         "(require_signed)")
    write_log(root, "new")  # a signed log is what such a home reads
    assert verify(session_path(root, "new")).ok


def test_the_cli_option_requires_signatures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(REQUIRE_SIGNED_ENV, "")  # so that what the option sets is undone after
    home = tmp_path / "home"
    (home / "sessions").mkdir(parents=True)
    old = "ctx3_0001"  # a log recorded before logs were signed
    shutil.copy(CORPUS / f"{old}.jsonl", home / "sessions")
    assert main(["--home", str(home), "log", "verify", old]) == 0
    assert "unsigned" in capsys.readouterr().out
    assert main(["--home", str(home), "--require-signed", "log", "verify", old]) != 0
    out = capsys.readouterr().out
    assert "line 1 (seq 0): the record has no 'sig', but this home requires signed logs" in out


def test_an_old_corpus_log_replays_unless_signatures_are_required(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(REQUIRE_SIGNED_ENV, "")
    home = tmp_path / "home"
    (home / "sessions").mkdir(parents=True)
    old = "ctx3_0001"
    shutil.copy(CORPUS / f"{old}.jsonl", home / "sessions")
    assert main(["--home", str(home), "replay", old]) == 0
    capsys.readouterr()
    assert main(["--home", str(home), "--require-signed", "replay", old]) != 0
    assert f"session '{old}' is corrupt at line 1 (seq 0)" in capsys.readouterr().err


def test_a_config_that_misspells_the_setting_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[logs]\nrequire_signed = "yes"\n')
    with pytest.raises(UsageError, match=r"\[logs\] require_signed must be true or false"):
        load_file(tmp_path)
    (tmp_path / "config.toml").write_text("[logs]\nrequire_sigend = true\n")
    with pytest.raises(UsageError, match=r"unknown setting \[logs\] require_sigend"):
        load_file(tmp_path)


def test_the_note_is_private_and_written_before_the_first_record(tmp_path: Path) -> None:
    root = tmp_path / "home" / "sessions"
    with SessionLog.open(root, "s1", durability="flush") as log:
        note = tmp_path / "home" / "keys" / "signed" / "s1"
        assert note.exists() and note.stat().st_mode & 0o077 == 0
        assert log.next_seq == 0
        log.append(FIRST_KIND, 1, {}, T0)
    key = keyring_of(root, create=True).signing
    assert key is not None and key.secret.hex() not in note.read_text()
    assert note.read_text().startswith("mibyan-signed 1 0 ")
