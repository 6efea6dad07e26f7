"""A quoted value after a secret's name ends at its closing quote, and nowhere before: the
marks that end an unquoted value (``,``, ``;``, ``}``) are the password's own inside quotes.
Read as ends, they made the quoted value match nothing (its closing quote was not where the
pattern stopped), and the whole password stayed in clear; so did one whose closing quote the
text lost (an output cut off, a string continued on the next line)."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stages.log.redact import mask, redact


@pytest.mark.parametrize(("text", "expected"), [
    ('password="Hunt3r22;x9"', 'password="***"'),
    ('password="Hunt3r22,x9"', 'password="***"'),
    ("DB_TOKEN='Hunt3r22}x9'", "DB_TOKEN='***'"),
    ("password: 'Hunt3r22,x9'", "password: '***'"),
    ('api_key: "Hunt3r22}x9",', 'api_key: "***",'),
    ('conn(password="Hunt3r22;x9")', 'conn(password="***")'),
    ('PASSWORD="Hunt3r22', 'PASSWORD="***'),  # cut off
    ("export DB_PASSWORD='Hunt3r22\nnext line", "export DB_PASSWORD='***\nnext line"),
    ('password: "Hunt3r22', 'password: "***'),
    ('token = "Xk9mP2qR7sT4}uV8wY1zA3"', f'token = "{mask("Xk9mP2qR7sT4}uV8wY1zA3")}"'),
])
def test_a_quoted_value_is_masked_whole_up_to_its_quote(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    'api_key = os.environ["OPENAI_API_KEY"]',
    "token_count = len(tokens)",
    'AUTH_HEADER = "Authorization: Bearer %s"',
    "password: 'PASSWORD_FROM_ENV'",
])
def test_quoted_code_stays_readable(text: str) -> None:
    assert redact(text) == text


_SECRET = st.from_regex(r"[A-Za-z0-9!@^+\-]{1,8}[0-9][A-Za-z][,;&}\])>!@#^+=:|]"
                        r"[A-Za-z0-9,;&}\])>!@#^+=:|\-]{0,10}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(_SECRET, st.sampled_from(["password", "api_key", "DB_TOKEN", "secret"]),
       st.sampled_from(["=", " = ", ": "]), st.sampled_from(['"', "'"]),
       st.sampled_from(["", ",", ";", ")", "\n", " # the key"]), st.booleans())
def test_a_quoted_secret_never_stays_in_clear(secret: str, name: str, operator: str,
                                              quote: str, after: str, closed: bool) -> None:
    assume(not re.search(r"(.)\1{7}", secret))
    # A quote left open is closed by the line's end; before more text it could end anywhere.
    assume(closed or after in ("", "\n"))
    text = f"{name}{operator}{quote}{secret}{quote if closed else ''}{after}"
    assert secret not in redact(text), redact(text)
