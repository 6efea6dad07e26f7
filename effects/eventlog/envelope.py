"""Envelopes of the event log and their one-line JSON encoding.

An envelope is what the log stores: ``(session_id, seq, kind, schema_version, recorded_at,
prev_hash, payload)``. The log knows nothing of event classes (the payload is a JSON-able dict
produced by the events codec) except one kind: a session's log begins with
:data:`FIRST_KIND`.

On disk an envelope is one line of UTF-8 JSON, keys in the fixed order above, compact separators,
non-ASCII kept as is, the payload with sorted keys, then the line's own ``hash``::

    {"session_id":"s1","seq":0,"kind":"session_started","schema_version":1,
     "recorded_at":"2025-01-01T00:00:00Z","prev_hash":"000…0","payload":{"text":"hi"},
     "hash":"9f2…"}

``prev_hash`` is the SHA-256 hex digest of the previous line's bytes (without its newline);
the first record carries :data:`GENESIS_HASH`. ``hash`` is the SHA-256 of the line without its
``hash`` field (the line as the first format wrote it), so a record that was changed after it was
written is detected even when it is the last one, which no ``prev_hash`` vouches for. Lines of the
first format (no ``hash``) still read. A reader takes the keys in any order: the seal and the chain,
not the layout, vouch for a line. Each session has one file, ``<root>/<session_id>.jsonl``;
:func:`check_lines` checks such a file line by line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeGuard

import msgspec

from effects.eventlog.keys import KEY_ID_LEN, MAC_LEN, Keyring, SigningKey
from effects.eventlog.line_encoder import HASH_OPEN, MAX_LINE, SIG_OPEN, LineEncoder
from effects.eventlog.signed_sessions import must_sign, stripped_problem
from stages.errors import LogCorruptError, UsageError

__all__ = [
    "EMPTY",
    "ENVELOPE_KEYS",
    "FIRST_KIND",
    "GENESIS_HASH",
    "HASH_KEY",
    "MAX_LINE",
    "SIG_KEY",
    "SUFFIX",
    "CheckedLine",
    "Decoded",
    "Envelope",
    "SealBroken",
    "check_lines",
    "decode_line",
    "empty_log",
    "encode_hashed",
    "encode_line",
    "is_session_id",
    "line_hash",
    "list_session_ids",
    "read_line",
    "session_path",
    "signature_problem",
    "split_seal",
    "strict_lines",
    "validate_session_id",
]

GENESIS_HASH = "0" * 64
SUFFIX = ".jsonl"
ENVELOPE_KEYS = (
    "session_id", "seq", "kind", "schema_version", "recorded_at", "prev_hash", "payload"
)
HASH_KEY = "hash"
SIG_KEY = "sig"
FIRST_KIND = "session_started"

_SEAL_HEAD = len(HASH_OPEN) + 64 + 1  # ,"hash":"<64 hex>"
# A signed line ends ,"sig":"<key id>:<mac>"} where a sealed one ends }.
_SIG_TAIL = len(SIG_OPEN) + KEY_ID_LEN + 1 + MAC_LEN + 2
_KEYS = frozenset(ENVELOPE_KEYS)
_HASHED_KEYS = _KEYS | {HASH_KEY}
_SIGNED_KEYS = _HASHED_KEYS | {SIG_KEY}

_SESSION_ID = re.compile(r"[A-Za-z0-9_.\-]{1,200}")


class Envelope(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One record of a session's event log, its fields in the order of the line's keys.

    ``payload`` is a plain dict; treat it as read-only (the envelope is frozen, the dict is not).
    A msgspec struct: a sealed line is decoded into it directly, its types checked in C.
    """

    session_id: str
    seq: int
    kind: str
    schema_version: int
    recorded_at: str
    prev_hash: str
    payload: dict[str, Any]


def is_session_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is usable as a file name: 1-200 ASCII letters, digits, ``_``, ``-``
    and ``.``, not dots only."""
    return (isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None
            and value.strip(".") != "")


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is usable as a file name (:func:`is_session_id`), else
    raise :class:`UsageError`."""
    if not is_session_id(session_id):
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
    signer: SigningKey | None = None,
) -> bytes:
    """Encode one envelope as its canonical line (no trailing newline), sealed by its ``hash``
    and, with a ``signer``, signed (``sig``: the key's id and the HMAC of the seal).

    Raises :class:`UsageError` for arguments of the wrong type, a payload that is not JSON
    (NaN, infinities, unserialisable objects, lone surrogates, non-string keys mixed with
    string keys) and a line longer than :data:`MAX_LINE` (no reader would take it in).
    """
    return encode_hashed(session_id, seq, kind, schema_version, recorded_at, prev_hash,
                         payload, signer)[0]


def encode_hashed(
    session_id: str,
    seq: int,
    kind: str,
    schema_version: int,
    recorded_at: str,
    prev_hash: str,
    payload: dict[str, Any],
    signer: SigningKey | None = None,
) -> tuple[bytes, str]:
    """:func:`encode_line` and the line's :func:`line_hash`, which the writer chains the next
    record to (:meth:`LineEncoder.encode`, for one record)."""
    line, digest = LineEncoder(session_id, signer).encode(seq, kind, schema_version,
                                                          recorded_at, prev_hash, payload)
    return line[:-1], digest


class SealBroken(ValueError):
    """The line parses but is not the line its own hash was taken of."""


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-JSON constant {name}")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def decode_line(line: bytes) -> Envelope:
    """Parse one line (without newline) into an :class:`Envelope`, checking its own ``hash``
    if it has one (its signature, if any, is checked against a keyring by
    :func:`check_lines`).

    Raises :class:`ValueError` describing what is wrong; chaining is not checked here.
    """
    return _decode(line).envelope


def read_line(line: bytes) -> Decoded:
    """:func:`decode_line`, with what the line says of its seal and signature."""
    return _decode(line)


class Decoded(msgspec.Struct, frozen=True):
    """A line read: its envelope, whether it is sealed, the digest of the line (taken on the
    way when sealed), and its signature: the key id, the mac and the seal it signs."""

    envelope: Envelope
    sealed: bool
    digest: str | None
    signature: tuple[bytes, bytes, bytes] | None = None


_STRICT = msgspec.json.Decoder()


def _parse(line: bytes) -> Any:
    try:
        # A strict RFC 8259 parser, several times faster; what it accepts, the standard one
        # reads the same way. Whatever it refuses (a lone surrogate escape, NaN, a byte order
        # mark, a broken line) the standard parser below decides, and words the error.
        return _STRICT.decode(line)
    except msgspec.DecodeError:
        pass
    if line[:1] == b"{" and line[1:2] != b"\x00":  # UTF-8, as json.loads would detect it
        # One decoder for all lines: json.loads with parse_constant builds one per call.
        return _DECODER.decode(line.decode("utf-8", "surrogatepass"))
    return json.loads(line, parse_constant=_reject_constant)


def _decode(line: bytes) -> Decoded:
    """The line read (one pass over its bytes for both hashes when it is canonical)."""
    return _decode_sealed(line) or _decode_any(line)


def _decode_any(line: bytes) -> Decoded:
    """:func:`_decode` for any line: what it accepts, the reasons it refuses."""
    obj = _parse(line)
    if type(obj) is not dict:
        raise ValueError("not a JSON object")
    keys = set(obj)
    if keys != _KEYS and keys != _HASHED_KEYS and keys != _SIGNED_KEYS:
        raise ValueError(f"keys {list(obj)} are not the envelope keys")
    for key in ("session_id", "kind", "recorded_at", "prev_hash"):
        if type(obj[key]) is not str:
            raise ValueError(f"{key} is not a string")
    for key in ("seq", "schema_version"):
        if type(obj[key]) is not int:
            raise ValueError(f"{key} is not an integer")
    if type(obj["payload"]) is not dict:
        raise ValueError("payload is not an object")
    sealed, signed = HASH_KEY in obj, SIG_KEY in obj
    obj.pop(HASH_KEY, None)
    obj.pop(SIG_KEY, None)
    if not sealed:
        return Decoded(Envelope(**obj), False, None)
    tail = _tail(line)
    holds, digest, own = _seal_holds(line, tail)
    if not holds or signed != (tail != 1):
        raise SealBroken("fails its own hash (the line was changed after it was written)")
    return Decoded(Envelope(**obj), True, digest, _signature(line, tail, own))


_ENVELOPE = msgspec.json.Decoder(Envelope)


def _decode_sealed(line: bytes) -> Decoded | None:
    """The common line in one pass: sealed (and maybe signed), its seal holding, the rest of
    it an envelope with the right types (checked by msgspec in C); None for any other line:
    :func:`_decode_any` decides that one, and words its error."""
    tail = _tail(line)
    holds, digest, own = _seal_holds(line, tail)
    if not holds:
        return None
    try:
        # The line as the seal hashed it: the object without its seal (and signature).
        envelope = _ENVELOPE.decode(line[:len(line) - tail - _SEAL_HEAD] + b"}")
    except msgspec.DecodeError:  # a ValidationError (a missing key, a wrong type) too
        return None
    return Decoded(envelope, True, digest, _signature(line, tail, own))


def _tail(line: bytes) -> int:
    """The bytes after the seal's closing quote: ``}``, or a signature and ``}``."""
    if line[-_SIG_TAIL:-_SIG_TAIL + len(SIG_OPEN)] == SIG_OPEN \
            and line[-MAC_LEN - 3:-MAC_LEN - 2] == b":" and line.endswith(b'"}'):
        return _SIG_TAIL
    return 1


def split_seal(line: bytes) -> tuple[bool, str, tuple[bytes, bytes, bytes] | None]:
    """For a line in the writer's layout: whether its seal holds, the line's digest, and its
    signature (key id, mac, the seal it signs) if it has one; a reader that checked the rest
    of the line its own way (the insights index) checks these so."""
    tail = _tail(line)
    holds, digest, own = _seal_holds(line, tail)
    return holds, digest, _signature(line, tail, own) if holds else None


def signature_problem(signature: tuple[bytes, bytes, bytes] | None,
                      keyring: Keyring) -> str | None:
    """What is wrong with a line's signature under ``keyring`` (None: it holds, or there is
    none)."""
    if signature is None:
        return None
    key_id, mac, seal = signature
    holds = keyring.holds(key_id, seal, mac)
    if holds is None:
        return (f"is signed with key {key_id.decode('ascii')}, which this home does not hold "
                "(import it with `mibyan log import-key FILE`)")
    if not holds:
        return "fails its signature (forged, or changed after it was signed)"
    return None


def _signature(line: bytes, tail: int, own: bytes) -> tuple[bytes, bytes, bytes] | None:
    if tail == 1:
        return None
    return line[-_SIG_TAIL + len(SIG_OPEN):-MAC_LEN - 3], line[-MAC_LEN - 2:-2], own


def _seal_holds(line: bytes, tail: int) -> tuple[bool, str, bytes]:
    """Whether the seal holds, the line's digest and the seal. The seal hashes everything
    before it (plus ``}``): both hashes share the pass over that part, the line's own goes
    on over the seal and what follows it."""
    view = memoryview(line)
    end = len(line) - tail - _SEAL_HEAD
    running = hashlib.sha256(view[:max(end, 0)])
    seal = running.copy()
    seal.update(b"}")
    running.update(view[max(end, 0):])
    own = seal.hexdigest().encode("ascii")
    holds = (end > 0 and line[end:end + _SEAL_HEAD] == b"".join((HASH_OPEN, own, b'"'))
             and (tail != 1 or line.endswith(b"}")))
    return holds, running.hexdigest(), own


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
        if entry.name.endswith(SUFFIX) and entry.is_file() and is_session_id(stem):
            ids.append(stem)
    return sorted(ids)



class CheckedLine(msgspec.Struct, frozen=True):
    """One line of a log file, checked against the line before it (a struct: one per line
    read, made in C)."""

    number: int  # 1-based line number
    start: int  # byte offset of the line
    seq: int  # the seq this line should carry
    digest: str  # sha256 of the line's bytes
    envelope: Envelope | None  # None when the line has a problem
    problem: str | None
    torn: bool = False  # the final line has no newline: a write cut short by a crash
    key_id: str | None = None  # the key that signed the line (None: unsigned)


_TORN = "has no trailing newline (torn write)"


class _Oversized(msgspec.Struct, frozen=True):
    """A line longer than :data:`MAX_LINE`, skipped (hashed on the way, never held)."""

    length: int
    digest: str


def _skip_oversized(fh: IO[bytes], chunk: bytes) -> _Oversized:
    """The rest of a line longer than :data:`MAX_LINE`, skipped (hashed on the way)."""
    running, length = hashlib.sha256(chunk), len(chunk)
    while not chunk.endswith(b"\n") and (chunk := fh.readline(1 << 20)):
        running.update(chunk.removesuffix(b"\n"))
        length += len(chunk)
    return _Oversized(length, running.hexdigest())


def check_lines(fh: IO[bytes], session_id: str, keyring: Keyring) -> Iterator[CheckedLine]:
    """Check every line, signatures against ``keyring``; after a bad line, continue relative
    to it (so problems stay local). Each line is read with a bound (:data:`MAX_LINE`).

    Only a final line without its newline is torn; every other problem is corruption, a line
    longer than :data:`MAX_LINE` too (no writer makes one, so it is not a write cut short).
    """
    prev_hash, expected, start, number = GENESIS_HASH, 0, 0, 0
    sealed_before = signed_before = False
    # The seq from which this home signed the session (or requires signatures): a log whose
    # signatures were all stripped would otherwise pass as one from before logs were signed.
    must = must_sign(keyring, session_id)
    while chunk := fh.readline(MAX_LINE + 1):
        number += 1
        if len(chunk) > MAX_LINE and not chunk.endswith(b"\n"):
            skipped = _skip_oversized(fh, chunk)
            yield CheckedLine(number, start, expected, skipped.digest, None,
                              f"is {skipped.length:,} bytes long, more than a record may be "
                              f"({MAX_LINE:,} bytes)")
            prev_hash, expected, start = skipped.digest, expected + 1, start + skipped.length
            continue
        if not chunk.endswith(b"\n"):  # only ever the last line
            yield CheckedLine(number, start, expected, line_hash(chunk), None, _TORN, True)
            return
        raw = chunk[:-1]
        try:
            decoded = _decode(raw)
        except ValueError as exc:
            prev_hash = line_hash(raw)
            yield CheckedLine(number, start, expected, prev_hash, None,
                              str(exc) if isinstance(exc, SealBroken)
                              else f"does not parse ({exc})")
            expected, start = expected + 1, start + len(chunk)
            continue
        envelope, signature = decoded.envelope, decoded.signature
        problem = (_link_problem(envelope, session_id, expected, prev_hash)
                   or _order_problem(decoded, number, sealed_before, signed_before)
                   or stripped_problem(must, envelope.seq, signature is not None)
                   or signature_problem(signature, keyring))
        prev_hash = decoded.digest or line_hash(raw)
        yield CheckedLine(number, start, expected, prev_hash, None if problem else envelope,
                          problem, False,
                          None if signature is None else signature[0].decode("ascii"))
        expected, start = envelope.seq + 1, start + len(chunk)
        sealed_before = sealed_before or decoded.sealed
        signed_before = signed_before or signature is not None


def _link_problem(envelope: Envelope, session_id: str, seq: int, prev_hash: str) -> str | None:
    if envelope.session_id != session_id:
        return f"belongs to session {envelope.session_id!r}, not {session_id!r}"
    if envelope.seq != seq:
        return f"has seq {envelope.seq}, expected {seq}"
    if envelope.prev_hash != prev_hash:
        return "does not chain (prev_hash is not the hash of the previous line)"
    return None


def _order_problem(decoded: Decoded, number: int, sealed_before: bool,
                   signed_before: bool) -> str | None:
    if number == 1 and decoded.envelope.kind != FIRST_KIND:
        return f"is {decoded.envelope.kind!r}, but a session log begins with {FIRST_KIND!r}"
    # A writer never goes back to an older format: the seal or signature was stripped.
    if sealed_before and not decoded.sealed:
        return f"has no {HASH_KEY!r} although the records before it have one"
    if signed_before and decoded.signature is None:
        return (f"has no {SIG_KEY!r} although the records before it are signed "
                "(its signature was stripped)")
    return None


def _corruption(path: Path, session_id: str, line: CheckedLine) -> LogCorruptError:
    """The error for a bad line, naming the file, the line and the seq."""
    return LogCorruptError(
        f"event log {path} of session {session_id!r} is corrupt at line {line.number} "
        f"(seq {line.seq}): the record {line.problem}"
    )


EMPTY = f"the log has no complete record, but a session log begins with {FIRST_KIND!r}"


def empty_log(path: Path, session_id: str) -> LogCorruptError:
    """The error for a log without one complete record (so without its session start)."""
    return LogCorruptError(
        f"event log {path} of session {session_id!r} is corrupt at line 1 (seq 0): {EMPTY}"
    )


def strict_lines(fh: IO[bytes], session_id: str, path: Path,
                 keyring: Keyring) -> Iterator[CheckedLine]:
    """Yield good lines and, last, a torn tail; raise for any other bad line."""
    for line in check_lines(fh, session_id, keyring):
        if line.problem is not None and not line.torn:
            raise _corruption(path, session_id, line)
        yield line
