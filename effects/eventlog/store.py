"""The append-only, hash-chained, crash-safe event log: one JSONL file per session.

* :class:`SessionLog` is the single writer of one session. It holds an exclusive ``flock`` on
  ``<root>/<session_id>.jsonl`` (a second writer of the same session, in any process, gets
  :class:`LogConflictError`; different sessions never interfere). On open it scans the file:
  a final line without its newline (a torn write) is cut off with a warning; any other bad line,
  the last one included, raises :class:`LogCorruptError` and nothing is cut or appended. A new
  log's first record must be a session start. Each append is one ``write()`` of a whole line;
  :meth:`SessionLog.sync` makes what was written durable (``fsync``) in ``"durable"`` mode and is
  a no-op in ``"flush"`` mode.
* :func:`read_envelopes` and :func:`verify` are for readers (replay, insights, tooling); they
  never modify a file.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

import attrs

from effects.eventlog.envelope import (
    EMPTY,
    FIRST_KIND,
    GENESIS_HASH,
    SUFFIX,
    Envelope,
    check_lines,
    empty_log,
    list_session_ids,
    session_path,
    strict_lines,
    validate_session_id,
)
from effects.eventlog.keys import Keyring, keyring_of
from effects.eventlog.line_encoder import LineEncoder
from effects.eventlog.signed_sessions import note_signed
from effects.logs import get_logger
from stages.errors import LogConflictError, LogCorruptError, LogError, UsageError

__all__ = [
    "Durability",
    "Envelope",
    "SessionLog",
    "VerifyReport",
    "list_session_ids",
    "read_envelopes",
    "session_path",
    "verify",
]

log = get_logger(__name__)

Durability = Literal["durable", "flush"]
AppendItem = tuple[str, int, dict[str, Any], str]  # (kind, schema_version, payload, recorded_at)


# --- the writer ---------------------------------------------------------------------------------


class SessionLog:
    """The single writer of one session's log. Create it with :meth:`SessionLog.open`."""

    def __init__(self, *, path: Path, session_id: str, durability: Durability, file: IO[bytes],
                 next_seq: int, last_hash: str, size: int, dir_dirty: bool,
                 keyring: Keyring) -> None:
        self.path = path
        self._encoder = LineEncoder(session_id, keyring.signing)
        self.session_id = session_id
        self.durability: Durability = durability
        self._file = file
        self._fd = file.fileno()
        self._next_seq = next_seq
        self._last_hash = last_hash
        self._size = size
        self._dir_dirty = dir_dirty
        self._created = dir_dirty
        self._lock = threading.Lock()
        self._closed = False
        self._broken: str | None = None

    @classmethod
    def open(cls, root: Path, session_id: str, *, durability: Durability = "durable",
             keyring: Keyring | None = None) -> SessionLog:
        """Open (creating if needed) and lock the log of ``session_id`` under ``root``; its
        records are signed with the home's key (made on first use), or ``keyring``'s."""
        if durability not in ("durable", "flush"):
            raise UsageError(f"durability must be 'durable' or 'flush', got {durability!r}")
        path = session_path(root, session_id)
        existed = path.exists()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Private, as exports and keys are: a log holds what the tools read.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            file = open(fd, "a+b", buffering=0)  # noqa: SIM115 - owned by the SessionLog
        except OSError as exc:
            raise LogError(f"cannot open the event log {path}: {exc.strerror or exc}") from exc
        try:
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise LogConflictError(
                    f"session {session_id!r} is already open for writing ({path})"
                ) from exc
            if keyring is None:
                keyring = keyring_of(root, create=True)
            next_seq, last_hash, size = _recover(file, path, session_id, durability, keyring)
            if keyring.signing is not None and keyring.keys_dir is not None:
                # Before the first record this writer signs: a signed record never exists
                # without the home's note that it signs the session.
                note_signed(keyring.keys_dir, session_id, next_seq, keyring.signing)
        except BaseException:
            file.close()
            raise
        return cls(path=path, session_id=session_id, durability=durability, file=file,
                   next_seq=next_seq, last_hash=last_hash, size=size, dir_dirty=not existed,
                   keyring=keyring)

    @property
    def next_seq(self) -> int:
        """The seq the next appended record will carry (= number of records)."""
        return self._next_seq

    @property
    def last_hash(self) -> str:
        """The hash the next record's ``prev_hash`` will carry."""
        return self._last_hash

    @property
    def closed(self) -> bool:
        return self._closed

    def append(self, kind: str, schema_version: int, payload: dict[str, Any],
               recorded_at: str) -> Envelope:
        """Append one record; it is handed to the OS before this returns."""
        seq, prev = self.add(kind, schema_version, payload, recorded_at)
        return Envelope(session_id=self.session_id, seq=seq, kind=kind,
                        schema_version=schema_version, recorded_at=recorded_at,
                        payload=payload, prev_hash=prev)

    def add(self, kind: str, schema_version: int, payload: dict[str, Any],
            recorded_at: str) -> tuple[int, str]:
        """:meth:`append` for a writer that needs no :class:`Envelope` back (the live
        journal, five times a turn): the record's seq and ``prev_hash``."""
        with self._lock:
            if self._closed or self._broken is not None:
                self._check_usable()
            seq, prev = self._next_seq, self._last_hash
            if seq == 0:
                _check_first(kind)
            line, digest = self._encoder.encode(seq, kind, schema_version, recorded_at, prev,
                                                payload)
            self._write(line)
            self._next_seq, self._last_hash = seq + 1, digest
        return seq, prev

    def append_many(self, items: Iterable[AppendItem]) -> list[Envelope]:
        """Append ``(kind, schema_version, payload, recorded_at)`` items with one ``write()``.

        Nothing is written if any item is invalid.
        """
        envelopes, lines = [], []
        with self._lock:
            self._check_usable()
            seq, prev = self._next_seq, self._last_hash
            for kind, version, payload, recorded_at in items:
                if seq == 0:
                    _check_first(kind)
                line, digest = self._encoder.encode(seq, kind, version, recorded_at, prev,
                                                    payload)
                lines.append(line)
                envelopes.append(Envelope(session_id=self.session_id, seq=seq, kind=kind,
                                          schema_version=version, recorded_at=recorded_at,
                                          payload=payload, prev_hash=prev))
                seq, prev = seq + 1, digest
            if lines:
                self._write(b"".join(lines))
                self._next_seq, self._last_hash = seq, prev
        return envelopes

    def sync(self) -> None:
        """Make every appended record durable (``fsync``); a no-op in ``"flush"`` mode."""
        with self._lock:
            self._check_usable()
            if self.durability == "durable":
                self._fsync()

    def close(self) -> None:
        """Sync (in ``"durable"`` mode), release the lock and close. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._created and self._next_seq == 0:
                    # A session that failed to start (its first record could not be encoded):
                    # an empty file would read as a corrupt log, so none is left.
                    self.path.unlink(missing_ok=True)
                elif self.durability == "durable" and self._broken is None:
                    self._fsync()
            finally:
                self._file.close()

    def __enter__(self) -> SessionLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"next_seq={self._next_seq}"
        return f"<SessionLog {self.session_id!r} {self.durability} {state}>"

    def _check_usable(self) -> None:
        if self._closed:
            raise LogError(f"event log of session {self.session_id!r} is closed")
        if self._broken is not None:
            raise LogError(f"event log of session {self.session_id!r} is unusable: {self._broken}")

    def _write(self, data: bytes) -> None:
        try:
            written = os.write(self._fd, data)
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            self._undo_partial_write(exc)
            raise LogError(
                f"cannot append to the log of session {self.session_id!r}: {exc}"
            ) from exc
        self._size += len(data)

    def _undo_partial_write(self, exc: OSError) -> None:
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            self._broken = f"a failed write could not be undone ({exc})"

    def _fsync(self) -> None:
        try:
            os.fsync(self._fd)
            if self._dir_dirty:
                _fsync_dir(self.path.parent)
                self._dir_dirty = False
        except OSError as exc:
            self._broken = f"fsync failed ({exc})"
            raise LogError(f"cannot sync the log of session {self.session_id!r}: {exc}") from exc


def _check_first(kind: str) -> None:
    # Readers refuse a log that does not begin with a session start, so none is written.
    if kind != FIRST_KIND:
        raise UsageError(f"a session log begins with {FIRST_KIND!r}, not {kind!r}")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _recover(file: IO[bytes], path: Path, session_id: str, durability: Durability,
             keyring: Keyring) -> tuple[int, str, int]:
    """Scan the locked file; cut a torn tail, raise for corruption.

    Return ``(next_seq, last_hash, size)``.
    """
    next_seq, last_hash, fd = 0, GENESIS_HASH, file.fileno()
    with open(fd, "rb", buffering=1 << 16, closefd=False) as fh:
        fh.seek(0)
        for line in strict_lines(fh, session_id, path, keyring):
            if line.problem is None:
                next_seq, last_hash = line.seq + 1, line.digest
                continue
            size = os.fstat(fd).st_size
            os.ftruncate(fd, line.start)
            if durability == "durable":
                os.fsync(fd)
            log.warning("event_log.torn_tail_cut", session_id=session_id, path=str(path),
                        line=line.number, seq=line.seq, bytes_cut=size - line.start,
                        reason=line.problem)
    return next_seq, last_hash, os.fstat(fd).st_size


# --- readers ------------------------------------------------------------------------------------


def _reader_session_id(path: Path, session_id: str | None) -> str:
    if session_id is not None:
        return validate_session_id(session_id)
    if not path.name.endswith(SUFFIX):
        raise UsageError(f"cannot tell the session of {path}: pass session_id=")
    return validate_session_id(path.name[: -len(SUFFIX)])


def _open_for_reading(path: Path) -> IO[bytes]:
    try:
        return open(path, "rb", buffering=1 << 16)
    except FileNotFoundError as exc:
        raise UsageError(f"no event log at {path}") from exc
    except OSError as exc:
        raise UsageError(f"cannot read the event log {path}: {exc.strerror or exc}") from exc


def read_envelopes(path: Path, *, tolerate_torn_tail: bool = True,
                   session_id: str | None = None,
                   keyring: Keyring | None = None) -> Iterator[Envelope]:
    """Yield the envelopes of the log at ``path`` in order.

    The session id is taken from the file name unless given; signatures are checked against
    the keys of the home the log is in, unless a ``keyring`` is given. A final line without its
    newline (a crash, or a writer in the middle of an append) is skipped when tolerated, else
    it raises :class:`LogCorruptError`, as does any other bad line (raised when reached) and a
    log with no complete record (a session log begins with its session start).
    """
    path = Path(path)
    sid = _reader_session_id(path, session_id)
    keyring = keyring_of(path.parent) if keyring is None else keyring
    return _read(_open_for_reading(path), path, sid, tolerate_torn_tail, keyring)


def _read(fh: IO[bytes], path: Path, session_id: str, tolerate: bool,
          keyring: Keyring) -> Iterator[Envelope]:
    with fh:
        empty = True
        for line in strict_lines(fh, session_id, path, keyring):
            if line.envelope is not None:
                empty = False
                yield line.envelope
            elif not tolerate:
                raise LogCorruptError(
                    f"event log {path} of session {session_id!r} has a torn tail at line "
                    f"{line.number} (seq {line.seq}): the record {line.problem}"
                )
        if empty:
            raise empty_log(path, session_id)


@attrs.frozen(kw_only=True)
class VerifyReport:
    """What :func:`verify` found.

    ``count`` is the number of valid records; ``ok`` is false when a complete record is bad, or
    none is good (``problems`` says which and why, by line and seq). A final line without its
    newline is a crash remnant, reported through ``torn_tail`` (``SessionLog.open`` cuts it); it
    does not make the log not ``ok``. ``signed`` counts the valid records that carry a signature
    that holds, ``key_ids`` names the keys that made them: a log written before logs were
    signed has none (it is ``unsigned``, which is no error).
    """

    session_id: str
    count: int
    ok: bool
    problems: tuple[str, ...]
    torn_tail: bool
    signed: int = 0
    key_ids: tuple[str, ...] = ()

    @property
    def signature(self) -> str:
        """``signed``, ``unsigned``, or ``partly signed`` (an old log resumed since)."""
        if self.signed == 0:
            return "unsigned"
        return "signed" if self.signed == self.count else "partly signed"


def verify(path: Path, *, session_id: str | None = None,
           keyring: Keyring | None = None) -> VerifyReport:
    """Check parse, own hash, signature, gap-free seq, hash chain, session ids and the session
    start of every record; never raises for corruption (a missing file or an unusable name is
    a :class:`UsageError`). Signatures are checked against the keys of the log's home unless
    a ``keyring`` is given."""
    path = Path(path)
    sid = _reader_session_id(path, session_id)
    keyring = keyring_of(path.parent) if keyring is None else keyring
    count, signed, keys, problems, torn = 0, 0, set(), [], False
    with _open_for_reading(path) as fh:
        for line in check_lines(fh, sid, keyring):
            if line.problem is None:
                count += 1
                if line.key_id is not None:
                    signed += 1
                    keys.add(line.key_id)
            elif line.torn:
                torn = True
            else:
                problems.append(f"line {line.number} (seq {line.seq}): the record {line.problem}")
    if count == 0 and not problems:
        problems.append(f"line 1 (seq 0): {EMPTY}")
    return VerifyReport(session_id=sid, count=count, ok=not problems, problems=tuple(problems),
                        torn_tail=torn, signed=signed, key_ids=tuple(sorted(keys)))
