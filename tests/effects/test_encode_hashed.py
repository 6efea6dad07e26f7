"""The writer chains each record to the digest ``encode_hashed`` takes on the way: it must be
the digest a reader takes of the line (``line_hash``), signed or not, and the line the same
``encode_line`` writes."""

from __future__ import annotations

import pytest

from effects.eventlog.envelope import MAX_LINE, encode_hashed, encode_line, line_hash
from effects.eventlog.keys import KEY_ID_LEN, SigningKey
from stages.errors import UsageError

T0 = "2025-01-01T00:00:00.000000+00:00"
PAYLOAD = {"text": "héllo \u2028 wörld", "n": 3, "nested": {"b": [1, 2.5, None], "a": True}}


KEY = SigningKey(key_id=b"0123456789abcdef"[:KEY_ID_LEN], secret=b"s" * 32)


@pytest.mark.parametrize("signer", [None, KEY])
def test_the_digest_is_the_line_hash_of_the_line_encode_line_writes(signer):
    line, digest = encode_hashed("s1", 4, "note", 1, T0, "a" * 64, PAYLOAD, signer)
    assert line == encode_line("s1", 4, "note", 1, T0, "a" * 64, PAYLOAD, signer)
    assert digest == line_hash(line)


def test_a_line_too_long_is_refused_by_both():
    payload = {"text": "x" * MAX_LINE}
    with pytest.raises(UsageError, match="longer than a log line may be"):
        encode_hashed("s1", 0, "note", 1, T0, "0" * 64, payload)
