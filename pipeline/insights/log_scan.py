"""Checking a log's records from any point of its hash chain, fast, for the insights index.

The index reads each log once and then only what was appended: :func:`scan` continues a chain
from a known ``(seq, last hash)``. A canonical line (as
:func:`effects.eventlog.envelope.encode_line`
writes it) is checked without parsing its payload: the envelope's head by pattern, its own seal,
its seq and its link to the line before. Any other line (the first, unsealed format; anything
odd) goes through :func:`effects.eventlog.envelope.decode_line`, the log's own reader. The first bad
line ends the scan; a final line without its newline is a write in progress, not a problem.
"""

from __future__ import annotations

import hashlib
import re
from typing import IO

import attrs

from effects.eventlog.envelope import FIRST_KIND, GENESIS_HASH, HASH_KEY, decode_line

__all__ = ["Position", "Scan", "scan"]

_HEAD = re.compile(rb'\{"session_id":"([A-Za-z0-9_.\-]+)","seq":(0|[1-9][0-9]*),'
                   rb'"kind":"([A-Za-z0-9_]+)","schema_version":(?:0|[1-9][0-9]*),'
                   rb'"recorded_at":"[^"\\]*","prev_hash":"([0-9a-f]{64})","payload":\{')
_SEAL_OPEN = b',"hash":"'
_SEAL_LEN = len(_SEAL_OPEN) + 64 + len(b'"}')


@attrs.frozen
class Position:
    """Where a log's chain stands after ``records`` good records: the byte offset past them,
    the hash of the last one (the next one's ``prev_hash``) and where that one starts."""

    records: int = 0
    offset: int = 0
    last_hash: str = GENESIS_HASH
    last_start: int = 0
    sealed: bool = False


@attrs.frozen
class Scan:
    """What :func:`scan` found: the position after the good records, and the problem that
    stopped it (``None``: the log is good to its end, a torn tail aside)."""

    position: Position
    problem: str | None


def scan(fh: IO[bytes], session_id: str, start: Position) -> Scan:
    """Check the records of ``fh`` (positioned at ``start.offset``) that continue ``start``."""
    pos = start
    for line in fh:
        if not line.endswith(b"\n"):
            break  # torn: a writer is in the middle of it, or crashed there
        raw = line[:-1]
        checked = _canonical(raw, session_id, pos) or _decoded(raw, session_id, pos)
        if isinstance(checked, str):
            return Scan(pos, f"seq {pos.records}: {checked}")
        digest, sealed = checked
        pos = Position(pos.records + 1, pos.offset + len(line), digest, pos.offset, sealed)
    return Scan(pos, None)


def _canonical(raw: bytes, session_id: str, pos: Position) -> tuple[str, bool] | str | None:
    """(digest, sealed) or a problem for a canonical line; None when it is not one."""
    head = _HEAD.match(raw)
    # The closing bytes are outside the seal's hash: a line must end in them to be canonical.
    if head is None or raw[-_SEAL_LEN:-_SEAL_LEN + len(_SEAL_OPEN)] != _SEAL_OPEN \
            or not raw.endswith(b'"}'):
        return None
    body = memoryview(raw)[:-_SEAL_LEN]
    running = hashlib.sha256(body)
    seal = running.copy()
    seal.update(b"}")
    if raw[-_SEAL_LEN + len(_SEAL_OPEN):-2] != seal.hexdigest().encode("ascii"):
        return "fails its own hash (the line was changed after it was written)"
    running.update(memoryview(raw)[-_SEAL_LEN:])
    problem = _link(head[1].decode(), int(head[2]), head[3].decode(), head[4].decode(),
                    session_id, pos)
    return problem or (running.hexdigest(), True)


def _decoded(raw: bytes, session_id: str, pos: Position) -> tuple[str, bool] | str:
    try:
        envelope = decode_line(raw)
    except ValueError as exc:
        return f"does not parse ({exc})"
    sealed = f',"{HASH_KEY}":"'.encode() in raw[-_SEAL_LEN:]
    if pos.sealed and not sealed:
        return f"has no {HASH_KEY!r} although the records before it have one"
    problem = _link(envelope.session_id, envelope.seq, envelope.kind, envelope.prev_hash,
                    session_id, pos)
    return problem or (hashlib.sha256(raw).hexdigest(), sealed)


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
