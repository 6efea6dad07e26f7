"""The event-log storage layer: round trips, the hash chain, torn tails, corruption, locking.

Every log here begins with a ``session_started`` record, as a session's log must; the storage
layer does not look inside payloads, so they are free-form.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from effects.eventlog.envelope import (
    FIRST_KIND,
    GENESIS_HASH,
    decode_line,
    encode_line,
    is_session_id,
)
from effects.eventlog.store import (
    Envelope,
    SessionLog,
    list_session_ids,
    read_envelopes,
    session_path,
    verify,
)
from stages.errors import LogConflictError, LogCorruptError, LogError, UsageError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
T0 = "2025-01-01T00:00:00Z"

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=8,
)
payloads = st.dictionaries(st.text(max_size=10), json_values, max_size=4)


def kind_at(seq: int, kind: str = "note") -> str:
    return FIRST_KIND if seq == 0 else kind


def write_log(root: Path, session_id: str, n: int, *, mode: str = "flush") -> list[Envelope]:
    with SessionLog.open(root, session_id, durability=mode) as log:
        return [log.append(kind_at(i), 1, {"i": i, "text": f"record {i} é✓"}, T0)
                for i in range(n)]


def unsealed(line: bytes) -> bytes:
    """The line without its own ``hash`` field: what that field is the SHA-256 of."""
    head, _, _ = line.rpartition(b',"hash":"')
    return head + b"}"


def lines_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


# --- format and round trip ----------------------------------------------------------------------


def test_round_trip(tmp_path: Path) -> None:
    written = write_log(tmp_path, "s1", 5)
    assert list(read_envelopes(session_path(tmp_path, "s1"))) == written
    assert [e.seq for e in written] == [0, 1, 2, 3, 4]


def test_line_format_is_canonical(tmp_path: Path) -> None:
    with SessionLog.open(tmp_path, "fmt", durability="flush") as log:
        log.append(FIRST_KIND, 2, {"b": [1, 2.5, None], "a": "é\n"}, T0)
    assert log.path == tmp_path / "fmt.jsonl"
    first_format = (
        '{"session_id":"fmt","seq":0,"kind":"session_started","schema_version":2,'
        f'"recorded_at":"{T0}","prev_hash":"{"0" * 64}",'
        '"payload":{"a":"é\\n","b":[1,2.5,null]}}'
    ).encode()
    own = hashlib.sha256(first_format).hexdigest()
    # Signed with the home's key (beside the sessions directory): HMAC-SHA256 of the seal.
    secret = bytes.fromhex((tmp_path.parent / "keys" / "signing.key").read_text().split()[-1])
    key_id = hashlib.sha256(b"mibyan log key id\0" + secret).hexdigest()[:16]
    mac = hmac.new(secret, own.encode(), hashlib.sha256).hexdigest()
    expected = first_format[:-1] + f',"hash":"{own}","sig":"{key_id}:{mac}"}}\n'.encode()
    assert log.path.read_bytes() == expected


def test_chain_links_every_line(tmp_path: Path) -> None:
    write_log(tmp_path, "chain", 6)
    lines = lines_of(session_path(tmp_path, "chain"))
    previous = GENESIS_HASH
    for line in lines:
        record = json.loads(line)
        assert list(record) == ["session_id", "seq", "kind", "schema_version", "recorded_at",
                                "prev_hash", "payload", "hash", "sig"]
        assert record["prev_hash"] == previous
        assert record["hash"] == hashlib.sha256(unsealed(line)).hexdigest()
        assert verify(session_path(tmp_path, "chain")).signed == len(lines)
        previous = hashlib.sha256(line).hexdigest()


def test_seq_is_gap_free_across_reopen(tmp_path: Path) -> None:
    write_log(tmp_path, "re", 3)
    with SessionLog.open(tmp_path, "re", durability="flush") as log:
        assert log.next_seq == 3
        env = log.append("note", 1, {"i": 3}, T0)
        assert env.seq == 3
        assert env.prev_hash == hashlib.sha256(lines_of(log.path)[2]).hexdigest()
    assert [e.seq for e in read_envelopes(log.path)] == [0, 1, 2, 3]
    assert verify(log.path).ok


def test_append_many_matches_single_appends(tmp_path: Path) -> None:
    items = [(kind_at(i), 1, {"i": i}, T0) for i in range(4)]
    with SessionLog.open(tmp_path / "a", "same") as one:
        singles = [one.append(*item) for item in items]
    with SessionLog.open(tmp_path / "b", "same") as many:
        assert many.append_many([]) == []
        batched = many.append_many(items)
        assert many.next_seq == 4
    assert batched == singles
    assert one.path.read_bytes() == many.path.read_bytes()


def test_invalid_append_writes_nothing(tmp_path: Path) -> None:
    with SessionLog.open(tmp_path, "bad", durability="flush") as log:
        log.append(FIRST_KIND, 1, {"ok": True}, T0)
        for args in [
            ("note", 1, ["not", "a", "dict"], T0),
            ("note", 1, {"x": float("nan")}, T0),
            ("note", 1, {"x": object()}, T0),
            ("note", 1, {"x": "\ud800"}, T0),
            ("", 1, {}, T0),
            ("note", True, {}, T0),
            ("note", 1, {}, 12345),
        ]:
            with pytest.raises(UsageError):
                log.append(*args)
        with pytest.raises(UsageError):
            log.append_many([("note", 1, {"fine": 1}, T0), ("note", 1, {"x": object()}, T0)])
        assert log.append("note", 1, {"ok": 2}, T0).seq == 1
    assert verify(log.path).count == 2


def test_a_new_log_whose_first_record_failed_leaves_no_file(tmp_path: Path) -> None:
    # An empty file would read as a corrupt log (replay --all and log verify fail on it).
    with SessionLog.open(tmp_path, "unstarted", durability="flush") as log:
        with pytest.raises(UsageError):
            log.append(FIRST_KIND, 1, {"model": "bad\udcff"}, T0)
    assert not session_path(tmp_path, "unstarted").exists()
    write_log(tmp_path, "started", 1)
    SessionLog.open(tmp_path, "started").close()  # a log this open did not create stays
    assert verify(session_path(tmp_path, "started")).count == 1


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "a b", "..", "é", "x" * 201, "a\nb"])
def test_invalid_session_ids_are_usage_errors(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError):
        session_path(tmp_path, bad)
    with pytest.raises(UsageError):
        SessionLog.open(tmp_path, bad)
    assert not is_session_id(bad)


@pytest.mark.parametrize("good", ["a", "a_1", "b-2.x", ".a", "x" * 200])
def test_valid_session_ids_name_files(tmp_path: Path, good: str) -> None:
    assert is_session_id(good) and session_path(tmp_path, good).name == f"{good}.jsonl"


def test_helpers_and_properties(tmp_path: Path) -> None:
    assert list_session_ids(tmp_path / "missing") == []
    write_log(tmp_path / "deep" / "root", "b-2.x", 1)
    write_log(tmp_path / "deep" / "root", "a_1", 1)
    (tmp_path / "deep" / "root" / "notes.txt").write_text("ignored")
    assert list_session_ids(tmp_path / "deep" / "root") == ["a_1", "b-2.x"]
    with SessionLog.open(tmp_path, "props") as log:
        assert (log.session_id, log.durability, log.next_seq) == ("props", "durable", 0)
        assert log.last_hash == GENESIS_HASH
        log.sync()
    with pytest.raises(UsageError):
        SessionLog.open(tmp_path, "props", durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        read_envelopes(tmp_path / "nope.jsonl")


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    log = SessionLog.open(tmp_path, "closed", durability="flush")
    log.sync()  # a no-op in flush mode
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogError):
        log.append("note", 1, {}, T0)
    with pytest.raises(LogError):
        log.sync()


# --- torn tails and corruption ------------------------------------------------------------------


def _bad_prev_hash_line(path: Path) -> bytes:
    return encode_line(path.stem, 3, "note", 1, T0, "f" * 64, {"i": 3}) + b"\n"


def _edited_last_line(path: Path) -> bytes:
    """The last line, edited as a person would: still valid JSON, still chained."""
    last = lines_of(path)[-1]
    return last.replace(b"record 2", b"record Z") + b"\n"


def _resealed_without_hash(path: Path) -> bytes:
    """The last line edited, its seal stripped so that it looks like the first format."""
    return unsealed(lines_of(path)[-1]).replace(b"record 2", b"record Z") + b"\n"


@pytest.mark.parametrize(
    "tail",
    [
        lambda path: lines_of(path)[0][:37],  # half a line
        lambda path: b"\x00garbage{\"seq\":",  # garbage without newline
        lambda path: lines_of(path)[-1],  # a whole record but for its newline
    ],
    ids=["half-line", "garbage", "all-but-newline"],
)
def test_torn_tail_is_cut_on_reopen(tmp_path: Path, tail, caplog) -> None:
    written = write_log(tmp_path, "torn", 3)
    path = session_path(tmp_path, "torn")
    good = path.read_bytes()
    junk = tail(path)
    path.write_bytes(good + junk)

    report = verify(path)
    assert (report.ok, report.torn_tail, report.count) == (True, True, 3)
    assert list(read_envelopes(path)) == written
    with pytest.raises(LogCorruptError, match="line 4"):
        list(read_envelopes(path, tolerate_torn_tail=False))

    caplog.set_level(logging.WARNING, logger="effects.eventlog.store")
    with SessionLog.open(tmp_path, "torn", durability="durable") as log:
        assert path.read_bytes() == good
        assert log.next_seq == 3
        log.append("note", 1, {"i": 3}, T0)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "event='event_log.torn_tail_cut'" in warning and "session_id='torn'" in warning
    assert f"bytes_cut={len(junk)}" in warning
    report = verify(path)
    assert (report.ok, report.torn_tail, report.count) == (True, False, 4)


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        (lambda path: b"{not json}\n", "does not parse"),
        (_bad_prev_hash_line, "does not chain"),
        (lambda path: lines_of(path)[-1] + b"\n", "has seq 2, expected 3"),
    ],
    ids=["unparsable-line", "bad-prev-hash", "repeated-line"],
)
def test_a_bad_complete_last_line_is_corruption_not_a_torn_write(tmp_path: Path, tail,
                                                                 problem: str) -> None:
    write_log(tmp_path, "last", 3)
    path = session_path(tmp_path, "last")
    corrupted = path.read_bytes() + tail(path)
    path.write_bytes(corrupted)
    _assert_corrupt_at(tmp_path, "last", line=4, seq=3, problem=problem, count=3)
    assert path.read_bytes() == corrupted  # nothing was cut or appended


@pytest.mark.parametrize("edit", [_edited_last_line, _resealed_without_hash],
                         ids=["edited", "seal-stripped"])
def test_an_edited_last_line_is_detected_and_not_sealed_in(tmp_path: Path, edit) -> None:
    write_log(tmp_path, "edit", 3)
    path = session_path(tmp_path, "edit")
    lines = lines_of(path)
    json.loads(edit(path))  # still valid JSON
    corrupted = b"".join(line + b"\n" for line in lines[:-1]) + edit(path)
    path.write_bytes(corrupted)
    problem = "fails its own hash" if edit is _edited_last_line else "has no 'hash'"
    _assert_corrupt_at(tmp_path, "edit", line=3, seq=2, problem=problem, count=2)
    assert path.read_bytes() == corrupted


def _assert_corrupt_at(root: Path, session_id: str, *, line: int, seq: int, problem: str,
                       count: int) -> None:
    """Every reader and the writer name the file, the line and the seq; nothing is changed."""
    path = session_path(root, session_id)
    where = rf"{path}.* line {line} \(seq {seq}\)"
    report = verify(path)
    assert (report.ok, report.count, report.torn_tail) == (False, count, False)
    assert report.problems[0].startswith(f"line {line} (seq {seq}): the record {problem}")
    with pytest.raises(LogCorruptError, match=where):
        list(read_envelopes(path))
    with pytest.raises(LogCorruptError, match=where):
        SessionLog.open(root, session_id)


def test_corruption_in_the_middle_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path, "mid", 5)
    path = session_path(tmp_path, "mid")
    lines = lines_of(path)
    lines[1] = lines[1].replace(b"record 1", b"record X")
    corrupted = b"\n".join(lines) + b"\n"
    path.write_bytes(corrupted)

    with pytest.raises(LogCorruptError, match=r"line 2 \(seq 1\).*fails its own hash"):
        SessionLog.open(tmp_path, "mid")
    assert path.read_bytes() == corrupted  # nothing was cut
    report = verify(path)
    assert not report.ok and report.count == 3 and not report.torn_tail
    assert [p[:16] for p in report.problems] == ["line 2 (seq 1): ", "line 3 (seq 2): "]
    assert "does not chain" in report.problems[1]
    with pytest.raises(LogCorruptError):
        list(read_envelopes(path))
    # the lock was released despite the error
    with pytest.raises(LogCorruptError):
        SessionLog.open(tmp_path, "mid")


def test_verify_reports_gaps_and_foreign_records(tmp_path: Path) -> None:
    write_log(tmp_path, "orig", 4)
    lines = lines_of(session_path(tmp_path, "orig"))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(b"\n".join(lines[:2] + lines[3:] + [lines[0]]) + b"\n")
    report = verify(copy)
    assert report.session_id == "copy" and not report.ok and not report.torn_tail
    assert any("belongs to session 'orig'" in p for p in report.problems)
    report = verify(copy, session_id="orig")
    assert not report.ok
    assert any("has seq 3, expected 2" in p for p in report.problems)
    assert report.problems[-1].startswith("line 4 (seq 4): the record has seq 0, expected 4")
    with pytest.raises(ValueError, match="envelope keys"):
        decode_line(b'{"seq":0}')


# --- locking and processes ----------------------------------------------------------------------


def test_second_open_of_a_session_conflicts(tmp_path: Path) -> None:
    with SessionLog.open(tmp_path, "held") as first:
        with pytest.raises(LogConflictError, match="'held'"):
            SessionLog.open(tmp_path, "held")
        with SessionLog.open(tmp_path, "other") as other:  # different sessions never interfere
            other.append(FIRST_KIND, 1, {}, T0)
        first.append(FIRST_KIND, 1, {}, T0)
    with SessionLog.open(tmp_path, "held") as again:
        assert again.next_seq == 1


def test_threads_share_one_writer(tmp_path: Path) -> None:
    with SessionLog.open(tmp_path, "threads", durability="flush") as log:
        log.append(FIRST_KIND, 1, {}, T0)

        def work(k: int) -> None:
            for i in range(200):
                log.append("note", 1, {"k": k, "i": i}, T0)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    report = verify(log.path)
    assert (report.ok, report.count) == (True, 801)


_CHILD_OPEN = """
import sys
from pathlib import Path
from effects.eventlog.store import SessionLog
from stages.errors import LogConflictError
try:
    SessionLog.open(Path(sys.argv[1]), "shared").close()
except LogConflictError as exc:
    print("conflict:", exc)
else:
    print("opened")
"""


def test_second_process_conflicts(tmp_path: Path) -> None:
    def child() -> str:
        result = subprocess.run(
            [sys.executable, "-c", _CHILD_OPEN, str(tmp_path)],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=True,
        )
        return result.stdout.strip()

    with SessionLog.open(tmp_path, "shared"):
        assert child().startswith("conflict: session 'shared'")
    assert child() == "opened"


def _append_in_child(root: str, session_id: str, n: int, start) -> None:
    start.wait(timeout=30)
    with SessionLog.open(Path(root), session_id, durability="flush") as log:
        for i in range(n):
            log.append(kind_at(i), 1, {"i": i, "who": session_id, "pad": "p" * 200}, T0)


def test_processes_writing_different_sessions(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_append_in_child, args=(str(tmp_path), f"p{k}", 500, start))
             for k in range(2)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    for k in range(2):
        report = verify(session_path(tmp_path, f"p{k}"))
        assert (report.ok, report.count, report.torn_tail) == (True, 500, False)
        assert [e.payload["i"] for e in read_envelopes(session_path(tmp_path, f"p{k}"))] == list(
            range(500))


# --- properties ---------------------------------------------------------------------------------

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(items=st.lists(st.tuples(st.sampled_from(["a", "tool_result", "ü"]), payloads),
                      min_size=1, max_size=8))
def test_property_append_then_read(items: list[tuple[str, dict]]) -> None:
    items = [(kind_at(i, kind), payload) for i, (kind, payload) in enumerate(items)]
    with tempfile.TemporaryDirectory() as d:
        with SessionLog.open(Path(d), "prop", durability="flush") as log:
            written = [log.append(kind, 1, payload, T0) for kind, payload in items]
        read = list(read_envelopes(log.path))
        assert [(e.kind, e.payload) for e in read] == items
        assert read == written
        report = verify(log.path)
        assert (report.ok, report.count, report.torn_tail) == (True, len(items), False)


def _check_truncation(root: Path, data: bytes, written: list[Envelope], cut: int) -> None:
    """Truncate a copy at ``cut``: a torn write, which reopening cuts, keeping exactly the
    records whose line is complete."""
    root.mkdir(exist_ok=True)
    path = session_path(root, "cut")
    path.write_bytes(data[:cut])
    survivors = data[:cut].count(b"\n")
    torn = not data[:cut].endswith(b"\n") and cut > 0
    report = verify(path)
    assert (report.ok, report.count, report.torn_tail) == (survivors > 0, survivors, torn)
    if survivors:
        assert list(read_envelopes(path)) == written[:survivors]
    else:  # no session start survived: nothing to read, the log is not a session's
        with pytest.raises(LogCorruptError, match=r"line 1 \(seq 0\)"):
            list(read_envelopes(path))
    with SessionLog.open(root, "cut", durability="flush") as log:
        assert log.next_seq == survivors
        assert path.read_bytes() == data[:cut].rpartition(b"\n")[0] + b"\n" * (survivors > 0)
        log.append(kind_at(survivors, "after"), 1, {"cut": cut}, T0)
    report = verify(path)
    assert (report.ok, report.count, report.torn_tail) == (True, survivors + 1, False)


def _source_log(root: Path, items: list[dict]) -> tuple[bytes, list[Envelope]]:
    with SessionLog.open(root / "src", "cut", durability="flush") as log:
        written = [log.append(kind_at(i), 1, payload, T0) for i, payload in enumerate(items)]
    return log.path.read_bytes(), written


@PROPERTY
@given(items=st.lists(payloads, min_size=1, max_size=5), data=st.data())
def test_property_truncation_at_any_byte_keeps_a_valid_prefix(items, data) -> None:
    with tempfile.TemporaryDirectory() as d:
        raw, written = _source_log(Path(d), items)
        cut = data.draw(st.integers(min_value=0, max_value=len(raw)), label="cut")
        _check_truncation(Path(d) / "logs", raw, written, cut)  # the same home


@PROPERTY
@given(items=st.lists(payloads, min_size=1, max_size=5), data=st.data())
def test_property_any_truncation_of_the_last_line_is_a_torn_write(items, data) -> None:
    with tempfile.TemporaryDirectory() as d:
        raw, written = _source_log(Path(d), items)
        last_start = raw[:-1].rfind(b"\n") + 1
        # from one byte of the last line up to all of it but its newline
        cut = data.draw(st.integers(min_value=last_start + 1, max_value=len(raw) - 1),
                        label="cut")
        _check_truncation(Path(d) / "logs", raw, written, cut)  # the same home


@PROPERTY
@given(items=st.lists(payloads, min_size=1, max_size=5), data=st.data())
def test_property_any_change_to_a_complete_line_is_corruption_at_its_seq(items, data) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        raw, _ = _source_log(root, items)
        seq = data.draw(st.integers(min_value=0, max_value=len(items) - 1), label="seq")
        starts = [0] + [i + 1 for i, byte in enumerate(raw) if byte == ord("\n")]
        # any byte of the line, its newline too unless that ends the file (which would make
        # the last line incomplete: a torn write, see above)
        end = starts[seq + 1] - (1 if seq == len(items) - 1 else 0)
        at = data.draw(st.integers(min_value=starts[seq], max_value=end - 1), label="at")
        byte = data.draw(st.integers(0, 255).filter(lambda b: b != raw[at]), label="byte")
        changed = raw[:at] + bytes([byte]) + raw[at + 1:]
        root = root / "logs"  # beside src: the same home, whose key signed the log
        root.mkdir()
        path = session_path(root, "cut")
        path.write_bytes(changed)

        report = verify(path)
        assert not report.ok and not report.torn_tail
        assert report.problems[0].startswith(f"line {seq + 1} (seq {seq}): the record ")
        where = rf"line {seq + 1} \(seq {seq}\)"
        with pytest.raises(LogCorruptError, match=where):
            list(read_envelopes(path))
        with pytest.raises(LogCorruptError, match=where):
            SessionLog.open(root, "cut")
        assert path.read_bytes() == changed


def test_truncation_at_every_byte_of_a_small_log(tmp_path: Path) -> None:
    raw, written = _source_log(tmp_path, [{"t": "é✓"}, {}])
    for cut in range(len(raw) + 1):
        _check_truncation(tmp_path / "logs", raw, written, cut)
    shutil.rmtree(tmp_path / "src")


def test_a_v1_model_failed_with_an_integer_code_reads_again(tmp_path):
    """Sessions logged with llama.cpp's integer ``code`` were unreadable for ever; the v2
    upcaster keeps the code as text, so they verify, replay and resume."""
    from effects.eventlog.codec import from_payload
    event = from_payload("model_failed", 1, {"error_type": "ProviderHTTPError",
                                             "message": "boom", "status": 500, "code": 500})
    assert event.code == "500"


def test_a_new_log_is_readable_by_its_owner_only(tmp_path):
    # Issue 25: logs were 0644 while exports and keys are 0600; a log holds what tools read.
    with SessionLog.open(tmp_path, "s1", durability="flush") as log:
        log.append(FIRST_KIND, 1, {}, "2026-01-01T00:00:00+00:00")
    assert session_path(tmp_path, "s1").stat().st_mode & 0o777 == 0o600
