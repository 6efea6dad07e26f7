"""What redaction leaves where it hid a secret (``holds_mask``), told from ordinary text."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stages.log.redact import holds_mask, redact

KNOWN = "Zq9-the-configured-key-4471"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("text", [
    "Please...wait",
    "Loading...done. Thinking......",
    "e-mail...sent; hmm...okay",
    "Wait......what",
    "range 100000...9999 and 123456...7890",
    "git diff v1.2.3...v2.0 and main...feature and HEAD~1...HEAD",
    "foo_bar_baz...quux",
    "***bold italic*** and **bold** and *it*",
    "a password of ****, or ******",
    "2 ** 3 * 4 and f(*args, **kwargs)",
    "an ellipsis… and [...] and (...)",
    '{"text": "Please...wait"}',
])
def test_ordinary_text_with_dots_and_stars_holds_no_mark(text: str) -> None:
    assert not holds_mask(text)


@pytest.mark.parametrize("text, known", [
    (f"my key is {KNOWN}, keep it", [KNOWN]),  # a known long secret: head and tail kept
    ("the code is hunter2-hunter", ["hunter2-hunter"]),  # a known short one: three stars
    ("key sk-abcdefgh here", []),  # a short token
    (f"token {GITHUB_TOKEN}.", []),
    ("aws_access_key_id = AKIAQXEGRWTYVJPXLNZP", []),  # head and tail all letters, a known kind
    (f"jwt {JWT}", []),
    (f"Authorization: Bearer {GITHUB_TOKEN}", []),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", []),
    ("x-api-key: abcd1234efgh5678ijkl", []),
    ("export API_KEY=s3cr3t", []),
    ("DB_PASSWORD: s3cr3t-pass-w0rd-long-one", []),
    ("postgres://admin:hunter2@db.local/app", []),
    ("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", []),
    (f"key:\n{PEM}\n", []),
    ("twilio SK" + "0123456789abcdef" * 2, []),
    ("bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0", []),
    # Tool-call arguments are JSON text: the masks inside it, escapes around them.
    (json.dumps({"password": "correct-horse-battery-staple"}), []),
    (json.dumps({"cmd": f"curl -H 'Authorization: Bearer {GITHUB_TOKEN}'"}), []),
    (json.dumps({"text": "line one\nhunter2-hunter"}), ["hunter2-hunter"]),
    (json.dumps({"text": f"say {KNOWN}"}), [KNOWN]),
    (json.dumps({"text": 'say Zq9"the-configured-key-4471'}), ['Zq9"the-configured-key-4471']),
])
def test_every_mask_redaction_writes_is_a_mark(text: str, known: list[str]) -> None:
    redacted = redact(text, known)
    assert redacted != text and not holds_mask(text, known)
    assert holds_mask(redacted, known)


def test_a_mask_after_a_json_escape_is_a_mark() -> None:
    """A log redacted with a key the export no longer knows: its mask is still found."""
    assert holds_mask(json.dumps({"text": "line one\nZq9-th...4471"}))
    assert not holds_mask(json.dumps({"text": "line one\nPlease...wait"}))


def test_a_mask_that_reads_as_prose_is_a_mark_only_when_its_secret_is_known() -> None:
    secret = "Please-keep-this-to-yourself-and-wait"
    redacted = redact(f"it is {secret}", [secret])
    assert redacted == "it is Please...wait"
    assert holds_mask(redacted, [secret]) and not holds_mask(redacted)


# No secret's name among them: "password: Please...wait" is where redaction writes a mask.
WORDS = st.sampled_from((
    "Please", "wait", "Loading", "done", "moment", "really", "okay", "e-mail", "re-run", "sure",
    "thanks", "config", "README", "HEAD", "main", "feature", "v1.2.3", "v2.0", "item", "a", "I",
    "null", "None",
))
NUMBERS = st.integers(0, 10**8).map(str)
EMPHASIS = st.tuples(st.sampled_from(("*", "**", "***", "_")), WORDS).map(
    lambda pair: pair[0] + pair[1] + pair[0])
GAPS = st.sampled_from((" ", ", ", ". ", "...", "... ", " ... ", "…", "\n", "! ", "? ",
                        " - ", " (", ") ", ": ", "; ", " = ", '"', "'", " [...] "))
TEXTS = st.lists(st.tuples(WORDS | NUMBERS | EMPHASIS, GAPS), max_size=30).map(
    lambda parts: "".join(word + gap for word, gap in parts))


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_ordinary_text_never_holds_a_mark(text: str) -> None:
    assert not holds_mask(text)
    assert not holds_mask(json.dumps({"text": text}))


SECRETS = st.text(st.sampled_from(string.ascii_letters + string.digits + "-_"),
                  min_size=8, max_size=48)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, secret=SECRETS, where=st.integers(0, 200), in_json=st.booleans())
def test_a_known_secret_redacted_leaves_a_mark(text: str, secret: str, where: int,
                                                in_json: bool) -> None:
    assume(secret not in text)
    text = f"{text[:where]} {secret} {text[where:]}"
    if in_json:
        text = json.dumps({"text": text})
    assert holds_mask(redact(text, [secret]), [secret])
