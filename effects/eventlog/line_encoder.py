"""The writer's side of a log line: an envelope encoded, sealed by its hash, maybe signed
(the layout is described in :mod:`effects.eventlog.envelope`).

A session's writer encodes every record with the same session id and one of a few kinds:
:class:`LineEncoder` makes the text those decide once (checking a kind and version the first
time it meets them), so a record costs its payload's JSON, its hashes and one join of bytes.
"""

from __future__ import annotations

import hashlib
from json.encoder import encode_basestring
from typing import Any

from effects.eventlog.encoded import EncodedPayload, payload_json
from effects.eventlog.keys import SigningKey
from stages.errors import UsageError

__all__ = ["HASH_OPEN", "MAX_LINE", "SIG_OPEN", "LineEncoder"]

# The longest line a reader takes in (a writer refuses to write a longer one): a line is read
# with this bound, so a huge or runaway line is a named problem of its log, never 60 MB in
# memory. DuckDB's default limit for one JSON object, so every line the logs hold it reads too.
MAX_LINE = 16 * 1024 * 1024
HASH_OPEN = b',"hash":"'
SIG_OPEN = b',"sig":"'


def _middle(kind: object, schema_version: object) -> str:
    """The text between a record's seq and its ``recorded_at`` value."""
    if not isinstance(kind, str) or not kind:
        raise UsageError(f"event kind must be a non-empty str, got {kind!r}")
    if type(schema_version) is not int or schema_version < 0:
        raise UsageError(f"schema_version must be an int >= 0, got {schema_version!r}")
    return f',"kind":{encode_basestring(kind)},"schema_version":{schema_version},"recorded_at":'


class LineEncoder:
    """Encodes the records of one session, signed by ``signer`` (None: sealed only)."""

    def __init__(self, session_id: str, signer: SigningKey | None) -> None:
        if not isinstance(session_id, str):
            raise UsageError(f"session id must be a str, got {session_id!r}")
        self._head = f'{{"session_id":{encode_basestring(session_id)},"seq":'
        self._mac = None if signer is None else signer.mac
        # What goes between the seal and the signature's mac: the seal's closing quote, the
        # signature's key and the key id.
        self._sig_open = b"" if signer is None else b'"' + SIG_OPEN + signer.key_id + b":"
        # (kind, schema_version) -> _middle's text, for the pairs that passed its checks.
        self._middles: dict[tuple[str, int], str] = {}

    def encode(self, seq: int, kind: str, schema_version: int, recorded_at: str,
               prev_hash: str, payload: dict[str, Any]) -> tuple[bytes, str]:
        """The record's line with its newline, and the line's :func:`line_hash` (taken without
        the newline), which the next record chains to. Both hashes share the one pass over
        the record's bytes: the seal's hash is copied off the line's before the seal goes on.

        Raises :class:`UsageError` for arguments of the wrong type, a payload that is not
        JSON, and a line longer than :data:`MAX_LINE`."""
        try:
            middle = self._middles[kind, schema_version]
        except (KeyError, TypeError):  # not met yet, or not hashable: checked (and refused)
            middle = self._middles[kind, schema_version] = _middle(kind, schema_version)
        if type(schema_version) is not int:  # True finds 1's text: a bool is no version
            _middle(kind, schema_version)
        if not isinstance(recorded_at, str):
            raise UsageError(f"recorded_at must be ISO-8601 text, got {recorded_at!r}")
        try:
            if type(payload) is EncodedPayload:
                body = payload.text
            elif isinstance(payload, dict):
                body = payload_json(payload)
            else:
                raise UsageError(f"payload must be a dict, got {type(payload).__name__}")
            unsealed = (f'{self._head}{seq}{middle}{encode_basestring(recorded_at)},'
                        f'"prev_hash":"{prev_hash}","payload":{body}').encode()
        except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
            raise UsageError(f"payload of {kind!r} is not JSON-serialisable: {exc}") from exc
        running = hashlib.sha256(unsealed)
        seal = running.copy()
        seal.update(b"}")
        own = seal.hexdigest().encode("ascii")
        if self._mac is None:
            rest = b"".join((HASH_OPEN, own, b'"}'))
        else:
            rest = b"".join((HASH_OPEN, own, self._sig_open, self._mac(own), b'"}'))
        if len(unsealed) + len(rest) > MAX_LINE:
            raise UsageError(f"a {kind!r} record of {len(unsealed) + len(rest):,} bytes is "
                             f"longer than a log line may be ({MAX_LINE:,} bytes)")
        running.update(rest)
        return b"".join((unsealed, rest, b"\n")), running.hexdigest()
