"""Checking a log's records from any point of its hash chain, fast, for the insights index.

The index reads each log once and then only what was appended: :func:`scan` continues a chain
from a known ``(seq, last hash)``. A canonical line (as
:func:`effects.eventlog.envelope.encode_line`
writes it) is checked without parsing its payload: the envelope's head by pattern, its own seal,
its seq and its link to the line before. Any other line (the first, unsealed format; anything
odd) goes through :func:`effects.eventlog.envelope.decode_line`, the log's own reader. The first bad
line ends the scan; a final line without its newline is a write in progress, not a problem.
Each line is read with the log's bound (:data:`effects.eventlog.envelope.MAX_LINE`): a longer
one is a problem of its log, never held in memory; a signed line's signature is checked
against the home's keys, as every reader of the log does.
"""

from __future__ import annotations

import re
from typing import IO

import attrs

from effects.eventlog.envelope import (
    FIRST_KIND,
    GENESIS_HASH,
    HASH_KEY,
    MAX_LINE,
    SIG_KEY,
    SealBroken,
    line_hash,
    read_line,
    signature_problem,
    split_seal,
)
from effects.eventlog.keys import Keyring
from effects.eventlog.signed_sessions import must_sign, stripped_problem

__all__ = ["Position", "Scan", "scan"]

_HEAD = re.compile(rb'\{"session_id":"([A-Za-z0-9_.\-]+)","seq":(0|[1-9][0-9]*),'
                   rb'"kind":"([A-Za-z0-9_]+)","schema_version":(?:0|[1-9][0-9]*),'
                   rb'"recorded_at":"[^"\\]*","prev_hash":"([0-9a-f]{64})","payload":\{')


@attrs.frozen
class Position:
    """Where a log's chain stands after ``records`` good records: the byte offset past them,
    the hash of the last one (the next one's ``prev_hash``) and where that one starts."""

    records: int = 0
    offset: int = 0
    last_hash: str = GENESIS_HASH
    last_start: int = 0
    sealed: bool = False
    signed: bool = False


@attrs.frozen
class Scan:
    """What :func:`scan` found: the position after the good records, and the problem that
    stopped it (``None``: the log is good to its end, a torn tail aside)."""

    position: Position
    problem: str | None


def scan(fh: IO[bytes], session_id: str, start: Position, keyring: Keyring) -> Scan:
    """Check the records of ``fh`` (positioned at ``start.offset``) that continue ``start``."""
    pos, must = start, must_sign(keyring, session_id)
    while line := fh.readline(MAX_LINE + 1):
        if not line.endswith(b"\n"):
            if len(line) > MAX_LINE:
                return Scan(pos, f"seq {pos.records}: the record is longer than a record may "
                                 f"be ({MAX_LINE:,} bytes)")
            break  # torn: a writer is in the middle of it, or crashed there
        raw = line[:-1]
        checked = _canonical(raw, session_id, pos, keyring) or _decoded(raw, session_id, pos,
                                                                       keyring)
        if not isinstance(checked, str):
            checked = stripped_problem(must, pos.records, checked[2]) or checked
        if isinstance(checked, str):
            return Scan(pos, f"seq {pos.records}: {checked}")
        digest, sealed, signed = checked
        pos = Position(pos.records + 1, pos.offset + len(line), digest, pos.offset, sealed,
                       signed)
    return Scan(pos, None)


Checked = tuple[str, bool, bool] | str  # (digest, sealed, signed), or the problem


def _canonical(raw: bytes, session_id: str, pos: Position, keyring: Keyring) -> Checked | None:
    """What a line in the writer's layout is, checked without parsing its payload; None when
    it is not in that layout (or its seal does not hold: the general path words that)."""
    head = _HEAD.match(raw)
    if head is None:
        return None
    holds, digest, signature = split_seal(raw)
    if not holds:
        return None
    problem = (_link(head[1].decode(), int(head[2]), head[3].decode(), head[4].decode(),
                     session_id, pos)
               or _stripped(pos, signature is not None)
               or signature_problem(signature, keyring))
    return problem or (digest, True, signature is not None)


def _decoded(raw: bytes, session_id: str, pos: Position, keyring: Keyring) -> Checked:
    """The log's own reader decides any other line: the first format, anything odd."""
    try:
        decoded = read_line(raw)
    except SealBroken as exc:
        return str(exc)
    except ValueError as exc:
        return f"does not parse ({exc})"
    envelope, signed = decoded.envelope, decoded.signature is not None
    if pos.sealed and not decoded.sealed:
        return f"has no {HASH_KEY!r} although the records before it have one"
    problem = (_link(envelope.session_id, envelope.seq, envelope.kind, envelope.prev_hash,
                     session_id, pos)
               or _stripped(pos, signed)
               or signature_problem(decoded.signature, keyring))
    return problem or (decoded.digest or line_hash(raw), decoded.sealed, signed)


def _stripped(pos: Position, signed: bool) -> str | None:
    if pos.signed and not signed:
        return (f"has no {SIG_KEY!r} although the records before it are signed "
                "(its signature was stripped)")
    return None


def _link(sid: str, seq: int, kind: str, prev_hash: str, session_id: str,
          pos: Position) -> str | None:
    if sid != session_id:
        return f"belongs to session {sid!r}, not {session_id!r}"
    if seq != pos.records:
        return f"has seq {seq}, expected {pos.records}"
    if prev_hash != pos.last_hash:
        return "does not chain (prev_hash is not the hash of the previous line)"
    if seq == 0 and kind != FIRST_KIND:
        return f"is {kind!r}, but a session log begins with {FIRST_KIND!r}"
    return None
