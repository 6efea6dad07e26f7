"""A log that is not a session's log: empty, garbage, or not begun by a session start; and the
self-verifying line format next to the first one (issue 8)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from effects.eventlog.envelope import FIRST_KIND, decode_line, encode_line, line_hash
from effects.eventlog.store import SessionLog, read_envelopes, session_path, verify
from stages.errors import LogCorruptError, LogError, UsageError

T0 = "2025-01-01T00:00:00Z"
CORPUS = sorted((Path(__file__).parents[1] / "corpus" / "v1").glob("*.jsonl"))


def _write(root: Path, session_id: str, data: bytes) -> Path:
    path = session_path(root, session_id)
    root.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _assert_not_a_session_log(path: Path, *, problem: str) -> None:
    report = verify(path)
    assert not report.ok and report.count == 0
    assert report.problems[0].startswith("line 1 (seq 0): ")
    assert problem in report.problems[0]
    with pytest.raises(LogCorruptError, match=rf"{path} .*line 1 \(seq 0\)"):
        list(read_envelopes(path))


def test_an_empty_log_is_corrupt(tmp_path: Path) -> None:
    path = _write(tmp_path, "empty", b"")
    _assert_not_a_session_log(path, problem="no complete record")


@pytest.mark.parametrize("garbage", [b"garbage\n", bytes(range(256)).replace(b"\n", b"") + b"\n",
                                     b"\x00\x01\x02\n\xff\n", b"[]\n", b'{"seq":0}\n'])
def test_a_log_overwritten_with_garbage_is_corrupt_and_kept(tmp_path: Path,
                                                            garbage: bytes) -> None:
    path = _write(tmp_path, "junk", garbage)
    _assert_not_a_session_log(path, problem="does not parse")
    with pytest.raises(LogCorruptError, match=r"line 1 \(seq 0\)"):
        SessionLog.open(tmp_path, "junk")
    assert path.read_bytes() == garbage


def test_garbage_without_a_newline_is_cut_and_leaves_no_session(tmp_path: Path) -> None:
    path = _write(tmp_path, "torn", b"garbage with no newline")
    report = verify(path)
    assert (report.ok, report.torn_tail) == (False, True)
    assert report.problems == (("line 1 (seq 0): the log has no complete record, but a session "
                                "log begins with 'session_started'"),)
    with pytest.raises(LogCorruptError, match="no complete record"):
        list(read_envelopes(path))


def test_a_log_that_does_not_begin_with_a_session_start_is_corrupt(tmp_path: Path) -> None:
    line = encode_line("headless", 0, "turn_started", 1, T0, "0" * 64, {})
    second = encode_line("headless", 1, FIRST_KIND, 1, T0, line_hash(line), {})
    data = line + b"\n" + second + b"\n"
    path = _write(tmp_path, "headless", data)
    report = verify(path)
    assert not report.ok and report.count == 1
    assert report.problems == (("line 1 (seq 0): the record is 'turn_started', but a session "
                                "log begins with 'session_started'"),)
    with pytest.raises(LogCorruptError, match=r"headless.jsonl .*line 1 \(seq 0\)"):
        list(read_envelopes(path))
    with pytest.raises(LogCorruptError, match=r"line 1 \(seq 0\)"):
        SessionLog.open(tmp_path, "headless")
    assert path.read_bytes() == data


def test_the_writer_refuses_a_first_record_that_is_not_a_session_start(tmp_path: Path) -> None:
    with SessionLog.open(tmp_path, "w", durability="flush") as log:
        with pytest.raises(UsageError, match="begins with 'session_started'"):
            log.append("turn_started", 1, {}, T0)
        with pytest.raises(UsageError, match="begins with 'session_started'"):
            log.append_many([("turn_started", 1, {}, T0)])
        assert log.next_seq == 0
        log.append_many([(FIRST_KIND, 1, {}, T0), ("turn_started", 1, {}, T0)])
    assert verify(log.path).ok


def test_an_unopenable_log_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(LogError, match="cannot open the event log"):
        SessionLog.open(blocker / "sessions", "s")
    directory = tmp_path / "dir.jsonl"
    directory.mkdir()
    with pytest.raises(UsageError, match="cannot read the event log"):
        verify(directory)


# --- the sealed line format next to the first one -----------------------------------------------


def test_a_line_is_sealed_by_the_hash_of_its_first_format() -> None:
    line = encode_line("s", 0, FIRST_KIND, 1, T0, "0" * 64, {"a": 1})
    first_format, _, seal = line.rpartition(b',"hash":"')
    assert seal == hashlib.sha256(first_format + b"}").hexdigest().encode() + b'"}'
    assert decode_line(line) == decode_line(first_format + b"}")  # the seal is not a field
    with pytest.raises(ValueError, match="fails its own hash"):
        decode_line(line.replace(b'"a":1', b'"a":2'))
    with pytest.raises(ValueError, match="fails its own hash"):
        decode_line(line.replace(b'},"hash"', b'}, "hash"'))  # not the canonical seal


@pytest.mark.parametrize("log", CORPUS, ids=[p.stem for p in CORPUS])
def test_a_first_format_log_reads_and_new_records_are_sealed(log: Path, tmp_path: Path) -> None:
    session_id = log.stem
    path = session_path(tmp_path, session_id)
    shutil.copy(log, path)
    old = list(read_envelopes(path))
    with SessionLog.open(tmp_path, session_id, durability="flush") as writer:
        assert writer.next_seq == len(old)
        writer.append("note", 1, {"after": "the first format"}, T0)
    data = path.read_bytes()
    assert data.startswith(log.read_bytes())  # nothing old was rewritten
    assert b'"hash":"' in data.splitlines()[-1]
    assert (verify(path).ok, verify(path).count) == (True, len(old) + 1)
    assert list(read_envelopes(path))[:-1] == old


def test_a_seal_once_written_cannot_be_dropped(tmp_path: Path) -> None:
    first = encode_line("mixed", 0, FIRST_KIND, 1, T0, "0" * 64, {})
    second = encode_line("mixed", 1, "note", 1, T0, line_hash(first), {"n": 1})
    stripped = second.rpartition(b',"hash":"')[0] + b"}"
    path = _write(tmp_path, "mixed", first + b"\n" + stripped + b"\n")
    report = verify(path)
    assert report.problems == (("line 2 (seq 1): the record has no 'hash' although the "
                                "records before it have one"),)
