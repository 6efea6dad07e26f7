"""Envelopes of the event log and their one-line JSON encoding.

An envelope is what the log stores: ``(session_id, seq, kind, schema_version, recorded_at,
prev_hash, payload)``. The log knows nothing of event classes; the payload is a JSON-able dict
produced by the events codec.

On disk an envelope is one line of UTF-8 JSON, keys in the fixed order above, compact separators,
non-ASCII kept as is, the payload with sorted keys::

    {"session_id":"s1","seq":0,"kind":"user_message","schema_version":1,
     "recorded_at":"2025-01-01T00:00:00Z","prev_hash":"000…0","payload":{"text":"hi"}}

``prev_hash`` is the SHA-256 hex digest of the previous line's bytes (without its newline);
the first record carries :data:`GENESIS_HASH`. Each session has one file,
``<root>/<session_id>.jsonl``; :func:`check_lines` checks such a file line by line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from json.encoder import encode_basestring
from pathlib import Path
from typing import IO, Any

import attrs

from stages.errors import LogCorruptError, UsageError

__all__ = [
    "CheckedLine",
    "ENVELOPE_KEYS",
    "Envelope",
    "GENESIS_HASH",
    "SUFFIX",
    "check_lines",
    "decode_line",
    "encode_line",
    "line_hash",
    "list_session_ids",
    "session_path",
    "strict_lines",
    "validate_session_id",
    "with_last",
]

GENESIS_HASH = "0" * 64
SUFFIX = ".jsonl"
ENVELOPE_KEYS = (
    "session_id", "seq", "kind", "schema_version", "recorded_at", "prev_hash", "payload"
)

_SESSION_ID = re.compile(r"[A-Za-z0-9_.\-]{1,200}")
_PAYLOAD_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
)


@attrs.frozen(kw_only=True)
class Envelope:
    """One record of a session's event log.

    ``payload`` is a plain dict; treat it as read-only (the envelope is frozen, the dict is not).
    """

    session_id: str
    seq: int
    kind: str
    schema_version: int
    recorded_at: str
    payload: dict[str, Any]
    prev_hash: str


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is usable as a file name, else raise :class:`UsageError`.

    Allowed: 1-200 ASCII letters, digits, ``_``, ``-`` and ``.``, not dots only.
    """
    if (
        not isinstance(session_id, str)
        or _SESSION_ID.fullmatch(session_id) is None
        or session_id.strip(".") == ""
    ):
        raise UsageError(
            f"invalid session id {session_id!r}: use 1-200 ASCII letters, digits, '_', '-', '.'"
        )
    return session_id


def line_hash(line: bytes) -> str:
    """SHA-256 hex digest of one line's bytes (without the newline)."""
    return hashlib.sha256(line).hexdigest()


def encode_line(
    session_id: str,
    seq: int,
    kind: str,
    schema_version: int,
    recorded_at: str,
    prev_hash: str,
    payload: dict[str, Any],
) -> bytes:
    """Encode one envelope as its canonical line (no trailing newline).

    Raises :class:`UsageError` for arguments of the wrong type or a payload that is not JSON
    (NaN, infinities, unserialisable objects, lone surrogates, non-string keys mixed with
    string keys).
    """
    if not isinstance(kind, str) or not kind:
        raise UsageError(f"event kind must be a non-empty str, got {kind!r}")
    if type(schema_version) is not int or schema_version < 0:
        raise UsageError(f"schema_version must be an int >= 0, got {schema_version!r}")
    if not isinstance(recorded_at, str):
        raise UsageError(f"recorded_at must be ISO-8601 text, got {recorded_at!r}")
    if not isinstance(payload, dict):
        raise UsageError(f"payload must be a dict, got {type(payload).__name__}")
    try:
        body = _PAYLOAD_ENCODER.encode(payload)
        text = (
            f'{{"session_id":{encode_basestring(session_id)},"seq":{seq},'
            f'"kind":{encode_basestring(kind)},"schema_version":{schema_version},'
            f'"recorded_at":{encode_basestring(recorded_at)},"prev_hash":"{prev_hash}",'
            f'"payload":{body}}}'
        )
        return text.encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise UsageError(f"payload of {kind!r} is not JSON-serialisable: {exc}") from exc


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-JSON constant {name}")


def decode_line(line: bytes) -> Envelope:
    """Parse one line (without newline) into an :class:`Envelope`.

    Raises :class:`ValueError` describing what is wrong; chaining is not checked here.
    """
    obj = json.loads(line, parse_constant=_reject_constant)
    if type(obj) is not dict:
        raise ValueError("not a JSON object")
    if tuple(obj) != ENVELOPE_KEYS:
        raise ValueError(f"keys {list(obj)} are not the envelope keys in order")
    for key in ("session_id", "kind", "recorded_at", "prev_hash"):
        if type(obj[key]) is not str:
            raise ValueError(f"{key} is not a string")
    for key in ("seq", "schema_version"):
        if type(obj[key]) is not int:
            raise ValueError(f"{key} is not an integer")
    if type(obj["payload"]) is not dict:
        raise ValueError("payload is not an object")
    return Envelope(**obj)


# --- files and lines ----------------------------------------------------------------------------


def session_path(root: Path, session_id: str) -> Path:
    """The log file of ``session_id`` under ``root`` (the id is validated)."""
    return Path(root) / f"{validate_session_id(session_id)}{SUFFIX}"


def list_session_ids(root: Path) -> list[str]:
    """The sorted ids of the sessions that have a log under ``root`` (``[]`` if none)."""
    root = Path(root)
    if not root.is_dir():
        return []
    ids = []
    for entry in root.iterdir():
        stem = entry.name[: -len(SUFFIX)]
        if entry.name.endswith(SUFFIX) and entry.is_file() and _is_valid_id(stem):
            ids.append(stem)
    return sorted(ids)


def _is_valid_id(session_id: str) -> bool:
    try:
        validate_session_id(session_id)
    except UsageError:
        return False
    return True


@attrs.frozen
class CheckedLine:
    """One line of a log file, checked against the line before it."""

    number: int  # 1-based line number
    start: int  # byte offset of the line
    seq: int  # the seq this line should carry
    digest: str  # sha256 of the line's bytes
    envelope: Envelope | None  # None when the line has a problem
    problem: str | None


def check_lines(fh: IO[bytes], session_id: str) -> Iterator[CheckedLine]:
    """Check every line; after a bad line, continue relative to it (so problems stay local)."""
    prev_hash, expected, start = GENESIS_HASH, 0, 0
    for number, chunk in enumerate(fh, 1):
        complete = chunk.endswith(b"\n")
        raw = chunk[:-1] if complete else chunk
        envelope, problem = None, "has no trailing newline (torn write)"
        if complete:
            try:
                envelope = decode_line(raw)
            except ValueError as exc:
                problem = f"does not parse ({exc})"
            else:
                problem = _link_problem(envelope, session_id, expected, prev_hash)
        digest = line_hash(raw)
        yield CheckedLine(number, start, expected, digest, None if problem else envelope, problem)
        expected = envelope.seq + 1 if envelope is not None else expected + 1
        prev_hash, start = digest, start + len(chunk)


def _link_problem(envelope: Envelope, session_id: str, seq: int, prev_hash: str) -> str | None:
    if envelope.session_id != session_id:
        return f"belongs to session {envelope.session_id!r}, not {session_id!r}"
    if envelope.seq != seq:
        return f"has seq {envelope.seq}, expected {seq}"
    if envelope.prev_hash != prev_hash:
        return "does not chain (prev_hash is not the hash of the previous line)"
    return None


def with_last(lines: Iterator[CheckedLine]) -> Iterator[tuple[CheckedLine, bool]]:
    """Pair each line with whether it is the last one."""
    previous = next(lines, None)
    for line in lines:
        yield previous, False  # type: ignore[misc]
        previous = line
    if previous is not None:
        yield previous, True


def strict_lines(fh: IO[bytes], session_id: str, path: Path) -> Iterator[CheckedLine]:
    """Yield good lines and, last, a torn tail; raise for a bad line before the end."""
    for line, is_last in with_last(check_lines(fh, session_id)):
        if line.problem is not None and not is_last:
            raise LogCorruptError(
                f"event log {path} of session {session_id!r} is corrupt at line {line.number} "
                f"(seq {line.seq}): the record {line.problem}"
            )
        yield line
