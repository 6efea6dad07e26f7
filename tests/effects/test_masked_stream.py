"""A streamed reply is shown once, already masked, however its pieces are cut."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effects.masked_stream import MaskedStream
from stages.log.redact import redact
from tests.stages.redaction_corpus import ORDINARY, SECRETS

GITHUB = "ghp_Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ1234"
KNOWN = "q7-short"
REPLY = (f"Your token is {GITHUB} and the key {KNOWN} works.\n"
         "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==\n"
         "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xHn\n"
         "-----END RSA PRIVATE KEY-----\nDone.")


def streamed(reply: str, cuts: list[int], known: tuple[str, ...] = ()) -> list[str]:
    shown: list[str] = []
    stream = MaskedStream(shown.append, known)
    last = 0
    for cut in sorted(set(cuts)):
        stream(reply[last:cut])
        last = cut
    stream(reply[last:])
    stream.flush()
    return shown


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16])
def test_a_reply_cut_in_pieces_shows_each_masked_piece_once(size: int) -> None:
    shown = streamed(REPLY, list(range(size, len(REPLY), size)), known=(KNOWN,))
    text = "".join(shown)
    assert text == redact(REPLY, (KNOWN,))  # what the log keeps, shown once
    for secret in (GITHUB, KNOWN, "dXNlcjpwYXNz", "MIIEpAIBAAKCAQEA"):
        assert all(secret not in piece for piece in shown)
        assert secret not in text


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([t for t, _ in SECRETS] + ORDINARY), min_size=1, max_size=4),
       st.lists(st.integers(min_value=0, max_value=400), max_size=30))
def test_any_cut_of_any_reply_shows_what_redaction_of_the_whole_shows(
        pieces: list[str], cuts: list[int]) -> None:
    reply = "\n".join(pieces)
    shown = "".join(streamed(reply, [c for c in cuts if c < len(reply)]))
    whole = redact(reply)
    # Shown once: the whole masked reply, or (when later text changed what was shown
    # already) its shown part and then the whole masked reply on its own line.
    assert shown == whole or shown.endswith("\n" + whole)
    for text, secret in SECRETS:
        if text in pieces:
            assert secret not in shown


def test_each_reply_starts_afresh_after_flush() -> None:
    shown: list[str] = []
    stream = MaskedStream(shown.append)
    stream("first ")
    stream("reply")
    stream.flush()
    stream("second")
    stream.flush()
    assert shown == ["first ", "reply", "second"]
