"""What keeps a signed log from passing as an unsigned one: the home's own record of the
sessions it signed, and the ``require_signed`` setting.

Stripping every signature from a log and recomputing its hash chain leaves a log that looks
like one written before logs were signed. The log cannot say otherwise (nothing left in it is
secret), so the home says it: when a writer that signs opens a session's log, it first notes,
in ``<home>/keys/signed/<session id>`` (beside the keys, as private as they are), the seq from
which it signs that session. The note is one line,
``mibyan-signed 1 <seq> <key id>:<HMAC of the session id and seq>``, so it cannot be changed to
a later seq without the key. A reader then refuses any unsigned record at or after that seq,
and names the session and the seq. The records of a log written before signing (a legacy log
resumed later) stay readable: they come before the noted seq.

A home can also refuse unsigned records altogether: ``require_signed = true`` under ``[logs]``
in ``<home>/config.toml``, or ``MIBYAN_REQUIRE_SIGNED=1`` in the environment (what
``mibyan --require-signed`` sets, so that the processes it starts inherit it).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from effects.eventlog.keys import Keyring, SigningKey
from stages.errors import LogError

__all__ = ["must_sign", "note_signed", "signed_from", "stripped_problem"]

_DIR = "signed"
_HEADER = "mibyan-signed 1 "


def _seal(session_id: str, seq: int) -> bytes:
    return hashlib.sha256(f"mibyan signed session\0{session_id}\0{seq}".encode()).hexdigest() \
        .encode("ascii")


def _note_path(keys: Path, session_id: str) -> Path:
    return keys / _DIR / session_id


def note_signed(keys: Path, session_id: str, seq: int, key: SigningKey) -> None:
    """Note that ``key`` signs ``session_id`` from ``seq`` on (unless a note is there: the
    earliest seq stands). Written before the first signed record, so that no signed record
    exists without its note."""
    path = _note_path(keys, session_id)
    if path.exists():
        return
    line = f"{_HEADER}{seq} {key.key_id.decode()}:{key.mac(_seal(session_id, seq)).decode()}\n"
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another writer of the home noted it first
    except OSError as exc:
        raise LogError(f"cannot note the signed session {session_id!r} in {keys}: {exc}") from exc
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def signed_from(keys: Path, session_id: str, keyring: Keyring) -> tuple[int, str] | None:
    """The seq from which the home signed ``session_id``, and why it must be signed from there;
    None when the home never signed it. A note that does not hold under the home's keys (edited,
    or of a key no longer held) makes every record of the session need a signature."""
    try:
        text = _note_path(keys, session_id).read_text("ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return 0, f"this home's note that it signed the session ({keys / _DIR}) is unreadable"
    seq_text, _, signature = text.strip().removeprefix(_HEADER).partition(" ")
    key_id, _, mac = signature.partition(":")
    if text.startswith(_HEADER) and seq_text.isdigit():
        seq = int(seq_text)
        if keyring.holds(key_id.encode("ascii"), _seal(session_id, seq), mac.encode("ascii")):
            return seq, (f"this home signed session {session_id!r} from seq {seq} on (its "
                         "signatures were stripped)")
    return 0, f"this home's note that it signed the session ({keys / _DIR}) does not hold"


def must_sign(keyring: Keyring, session_id: str) -> tuple[int, str] | None:
    """From which seq every record of ``session_id`` must be signed in the home of
    ``keyring``, and why; None when its unsigned records are no error (a legacy log)."""
    if keyring.require_signed:
        return 0, "this home requires signed logs (require_signed)"
    if keyring.keys_dir is None:
        return None
    return signed_from(keyring.keys_dir, session_id, keyring)


def stripped_problem(must: tuple[int, str] | None, seq: int, signed: bool) -> str | None:
    """The problem of a record of ``seq`` without a signature where ``must`` asks for one."""
    if signed or must is None or seq < must[0]:
        return None
    return f"has no 'sig', but {must[1]}"
