"""A record's bytes never change: the writer may get faster, the line it writes may not (old
logs must keep verifying, and a reader's seal and chain are taken over these exact bytes)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from effects.eventlog.encoded import EncodedPayload, payload_json
from effects.eventlog.envelope import FIRST_KIND, encode_line
from effects.eventlog.keys import NO_KEYS, Keyring, SigningKey
from effects.eventlog.store import SessionLog, read_envelopes

CORPUS = Path(__file__).parent.parent / "corpus"
SEALED = sorted([*(CORPUS / "v3").glob("*.jsonl"), *(CORPUS / "rules4").glob("*.jsonl")])
KEY = SigningKey(b"0123456789abcdef", b"k" * 32)
T0 = "2026-01-01T00:00:00.000000+00:00"
RECORDS = [
    (FIRST_KIND, 1, {"model": "m", "n": 3}),
    ("turn_started", 1, {"text": "héllo \u2028 wörld \"q\" \\ \n\t", "z": None, "a": True}),
    ("model_replied", 2, {"nested": {"b": [1, 2.5, -0.0, 1e16, 1e-7], "a": {}}, "e": []}),
    ("model_replied", 2, {"big": 10**30, "emoji": "\U0001f600", "ctl": "\x00\x1f"}),
    ("history_loaded", 1, EncodedPayload({"messages": [{"role": "user"}]},
                                          payload_json({"messages": [{"role": "user"}]}))),
]


def _written(tmp_path: Path, keyring: Keyring) -> bytes:
    with SessionLog.open(tmp_path, "pinned", durability="flush", keyring=keyring) as log:
        for kind, version, payload in RECORDS:
            log.add(kind, version, payload, T0)
    return log.path.read_bytes()


# Taken of the lines the writer made before its fast path (commit 9f02e33).
UNSIGNED = "9c219077c0ba95f5860099b881ca552fadcd0a192b2fc51e018970bc23abd116"
SIGNED = "24c9370cce2b8418fdbb39c7e10e465d3b20e62e66666c5bcdf3d77fb05ccda1"


@pytest.mark.parametrize(("keyring", "digest"), [
    (NO_KEYS, UNSIGNED), (Keyring({KEY.key_id: KEY}, KEY), SIGNED),
])
def test_the_lines_written_are_the_lines_of_before(tmp_path, keyring, digest):
    data = _written(tmp_path, keyring)
    assert hashlib.sha256(data).hexdigest() == digest
    lines = data.splitlines()
    prev = "0" * 64
    for seq, (line, (kind, version, payload)) in enumerate(zip(lines, RECORDS, strict=True)):
        assert line == encode_line("pinned", seq, kind, version, T0, prev, payload,
                                   keyring.signing)
        prev = hashlib.sha256(line).hexdigest()


@pytest.mark.parametrize("log", SEALED, ids=[p.stem for p in SEALED])
def test_the_corpus_is_written_again_byte_for_byte(tmp_path, log):
    envelopes = list(read_envelopes(log))
    with SessionLog.open(tmp_path, envelopes[0].session_id, durability="flush",
                         keyring=NO_KEYS) as again:
        for e in envelopes:
            again.add(e.kind, e.schema_version, e.payload, e.recorded_at)
    assert again.path.read_bytes() == log.read_bytes()
