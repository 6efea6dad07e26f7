"""The keys that sign a home's event logs: HMAC-SHA256, one signing key per home.

A home keeps its keys in ``<home>/keys`` (mode 0700), one file each (mode 0600). The signing
key, ``signing.key``, is made on first use by the first writer; any other ``*.key`` file there
is a key imported from another home (:func:`import_key`), so that the logs it signed verify
here. A key is named by its id, the first 16 hex digits of a SHA-256 of its secret: a signed
record names the id of the key that signed it, and a reader looks the key up by that id. The
file's name is not trusted: the id is always computed from the secret it holds.

A key file is one line, ``mibyan-log-key 1 <64 hex digits>``; :func:`export_key` writes the
signing key in that form for :func:`import_key` on another home. The secret never leaves
these files: only its id is printed or logged.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import attrs

from stages.errors import LogError, UsageError

__all__ = [
    "KEY_ID_LEN",
    "MAC_LEN",
    "NO_KEYS",
    "REQUIRE_SIGNED_ENV",
    "Keyring",
    "SigningKey",
    "export_key",
    "import_key",
    "install_key",
    "keyring_of",
    "keys_dir",
    "require_signed",
    "signing_key_file",
]

KEY_ID_LEN = 16
MAC_LEN = 64
SIGNING_FILE = "signing.key"
_HEADER = "mibyan-log-key 1 "
_SUFFIX = ".key"
_SECRET_BYTES = 32


_BLOCK = 64  # SHA-256's block size, which HMAC pads the key to


@attrs.frozen(repr=False)
class SigningKey:
    """One key: its id and its secret (never shown: ``repr`` names the id only)."""

    key_id: bytes  # KEY_ID_LEN ASCII hex digits
    secret: bytes
    # HMAC's two keyed SHA-256 states (RFC 2104), taken once: each record's signature then
    # costs two hash copies, half of what ``hmac.digest`` pays to key itself every call.
    _inner: Any = attrs.field(init=False, eq=False)
    _outer: Any = attrs.field(init=False, eq=False)

    def __attrs_post_init__(self) -> None:
        padded = self.secret.ljust(_BLOCK, b"\0")
        object.__setattr__(self, "_inner", hashlib.sha256(bytes(b ^ 0x36 for b in padded)))
        object.__setattr__(self, "_outer", hashlib.sha256(bytes(b ^ 0x5C for b in padded)))

    def mac(self, seal: bytes) -> bytes:
        """The signature of a record: HMAC-SHA256 of its seal (the SHA-256 hex digest of the
        record without its seal, which binds every byte of it), as hex."""
        inner = self._inner.copy()
        inner.update(seal)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest().encode("ascii")

    def __repr__(self) -> str:
        return f"<SigningKey {self.key_id.decode()}>"


def _key_of(secret: bytes) -> SigningKey:
    digest = hashlib.sha256(b"mibyan log key id\0" + secret).hexdigest()
    return SigningKey(digest[:KEY_ID_LEN].encode("ascii"), secret)


@attrs.frozen
class Keyring:
    """The keys a reader accepts, by id, and the one a writer signs with (None: unsigned)."""

    keys: dict[bytes, SigningKey] = attrs.field(factory=dict, repr=False)
    signing: SigningKey | None = None
    # The home's keys directory, which also notes the sessions it signed
    # (``effects.eventlog.signed_sessions``); None: a keyring of no home.
    keys_dir: Path | None = None
    require_signed: bool = False  # the home refuses every unsigned record

    def holds(self, key_id: bytes, seal: bytes, mac: bytes) -> bool | None:
        """Whether ``mac`` is the signature of ``seal`` under key ``key_id``; None when no key
        of that id is here."""
        key = self.keys.get(key_id)
        if key is None:
            return None
        return hmac.compare_digest(key.mac(seal), mac)


NO_KEYS = Keyring()


def keys_dir(root: Path) -> Path:
    """The keys of the home whose sessions directory is ``root`` (``<home>/sessions``)."""
    return Path(root).parent / "keys"


REQUIRE_SIGNED_ENV = "MIBYAN_REQUIRE_SIGNED"
_CACHE: dict[tuple[str, int, bool, bool], Keyring] = {}


def keyring_of(root: Path, *, create: bool = False) -> Keyring:
    """The keyring of the home whose sessions directory is ``root``; with ``create`` (a writer)
    the signing key is made if the home has none yet. Loaded once per state of the directory
    (an import changes its modification time) and of the home's ``require_signed``."""
    directory = keys_dir(root)
    required = require_signed(directory.parent)
    if create and not (directory / SIGNING_FILE).exists():
        _create_signing_key(directory)
    try:
        stamp = directory.stat().st_mtime_ns
    except FileNotFoundError:
        return Keyring(require_signed=True) if required else NO_KEYS
    cache_key = (str(directory), stamp, create, required)
    cached = _CACHE.get(cache_key)
    if cached is None:
        cached = _CACHE[cache_key] = _load(directory, signing=create, required=required)
    return cached


def require_signed(home: Path) -> bool:
    """Whether the home refuses every unsigned record: ``MIBYAN_REQUIRE_SIGNED`` (what
    ``mibyan --require-signed`` sets, so that the processes it starts inherit it), else
    ``[logs] require_signed`` in its config.toml. A config.toml that does not parse is the
    settings' error to report (every command reads them); here it requires nothing."""
    value = os.environ.get(REQUIRE_SIGNED_ENV, "").strip().lower()
    if value:
        return value not in ("0", "false", "no", "off")
    try:
        with open(home / "config.toml", "rb") as fh:
            section = tomllib.load(fh).get("logs", {})
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(section, dict) and section.get("require_signed") is True


def _load(directory: Path, *, signing: bool, required: bool) -> Keyring:
    keys: dict[bytes, SigningKey] = {}
    for path in sorted(directory.glob(f"*{_SUFFIX}")):
        key = _read_key(path)
        keys[key.key_id] = key
    own = _read_key(directory / SIGNING_FILE) if signing else None
    return Keyring(keys, own, directory, required)


def _read_key(path: Path) -> SigningKey:
    try:
        text = path.read_text("ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise LogError(f"cannot read the log key {path}: {exc}") from exc
    return _parse(text, str(path))


def _parse(text: str, where: str) -> SigningKey:
    hex_secret = text.strip().removeprefix(_HEADER)
    try:
        secret = bytes.fromhex(hex_secret)
    except ValueError:
        secret = b""
    if not text.startswith(_HEADER) or len(secret) != _SECRET_BYTES:
        raise UsageError(f"{where} is not a mibyan log key (a line '{_HEADER}<64 hex digits>')")
    return _key_of(secret)


def _text(key: SigningKey) -> bytes:
    return f"{_HEADER}{key.secret.hex()}\n".encode("ascii")


def _private_dir(directory: Path) -> None:
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask
    except OSError as exc:
        raise LogError(f"cannot make the key directory {directory}: {exc}") from exc


def _write_new(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` (mode 0600) unless it exists; whether it was written. The
    file appears whole or not at all (a link of a finished temporary file), so two writers
    making the first key at once agree on one."""
    fd, name = tempfile.mkstemp(prefix=".key-", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(name, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(name)


def _create_signing_key(directory: Path) -> None:
    _private_dir(directory)
    try:
        _write_new(directory / SIGNING_FILE, _text(_key_of(secrets.token_bytes(_SECRET_BYTES))))
    except OSError as exc:
        raise LogError(f"cannot make the log key in {directory}: {exc}") from exc


def signing_key_file(root: Path) -> bytes:
    """The signing key of the home of ``root`` as its file holds it (made if there is none):
    for a worker of that home elsewhere (a Ray node) to sign with, see :func:`install_key`."""
    keyring_of(root, create=True)
    return (keys_dir(root) / SIGNING_FILE).read_bytes()


def install_key(root: Path, data: bytes) -> None:
    """Make ``data`` (:func:`signing_key_file`'s) the signing key of the new home of ``root``,
    so that the logs written there verify in the home the key came from."""
    _parse(data.decode("ascii"), "a signing key")
    directory = keys_dir(root)
    _private_dir(directory)
    if not _write_new(directory / SIGNING_FILE, data):
        raise LogError(f"{directory} has a signing key already")


def export_key(root: Path, out: Path) -> str:
    """Write the signing key of the home of ``root`` to ``out`` (mode 0600, never over an
    existing file), for :func:`import_key` on another home; the key's id."""
    key = keyring_of(root, create=True).signing
    assert key is not None
    out = Path(out)
    if out.exists():
        raise UsageError(f"{out} exists; the key is written to a new file only")
    try:
        _write_new(out, _text(key))
    except OSError as exc:
        raise UsageError(f"cannot write the key to {out}: {exc}") from exc
    return key.key_id.decode()


def import_key(root: Path, source: Path) -> str:
    """Accept the logs signed by the key in ``source`` in the home of ``root``; the key's id."""
    try:
        text = Path(source).read_text("ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the key file {source}: {exc}") from exc
    key = _parse(text, str(source))
    directory = keys_dir(root)
    _private_dir(directory)
    try:
        _write_new(directory / f"{key.key_id.decode()}{_SUFFIX}", _text(key))
    except OSError as exc:
        raise LogError(f"cannot store the key in {directory}: {exc}") from exc
    return key.key_id.decode()
