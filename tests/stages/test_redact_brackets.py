"""A closing bracket after a named secret's value: it closes the call, the tuple or the note the
assignment stands in, and is no part of the value. Taken as the value's last character it made
the value read as an expression (``Hunt3r22)``), which is code, so the password stayed in clear;
or it was masked away with the value."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stages.log.redact import mask, redact


@pytest.mark.parametrize(("text", "expected"), [
    ("(password=Hunt3r22)", "(password=***)"),
    ("f(password=hunter22)", "f(password=***)"),
    ("connect(user, password=Hunt3r22)", "connect(user, password=***)"),
    ("password=hunter22)", "password=***)"),
    ("[password=hunter22]", "[password=***]"),
    ("{password=hunter22}", "{password=***}"),
    ("<password=hunter22>", "<password=***>"),
    ("f(g(password=hunter22))", "f(g(password=***))"),
    ("(token=abcd1234)", "(token=***)"),
    ("f(api_key=abcd1234)", "f(api_key=***)"),
    ("(API_KEY=zzQ9xx81)", "(API_KEY=***)"),
    ("(DB_PASSWORD=Hunt3r22);", "(DB_PASSWORD=***);"),
    ("(the token: Hunt3r22)", "(the token: ***)"),
    ("see [secret: abcd1234].", "see [secret: ***]."),
    ("f(password=Xk9mP2qR7sT4uV8wY1zA3)", f"f(password={mask('Xk9mP2qR7sT4uV8wY1zA3')})"),
])
def test_a_closing_bracket_after_a_named_value_is_kept_and_the_value_masked(
        text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    "f(password=getpass())",  # a call, closed inside the value
    "login(token=self.token)",
    "f(password=password)",
    "(auth=None)",
    "ProviderConfig(base_url=\"\", api_key=KEYLESS)",  # a constant
    "connect(password=os.environ['DB_PASSWORD'])",
])
def test_code_before_a_closing_bracket_stays_readable(text: str) -> None:
    assert redact(text) == text


# A secret as a person or a generator writes one: letters and digits (both, so it reads as
# neither a number nor a word naming a variable), and marks that end no value.
_SECRET = st.from_regex(r"[A-Za-z0-9!@^+\-]{2,12}[0-9][A-Za-z][A-Za-z0-9!@^+\-]{0,12}",
                        fullmatch=True)
_NAME = st.sampled_from(["password", "token", "api_key", "secret", "DB_PASSWORD", "AUTH_TOKEN"])
_OPERATOR = st.sampled_from(["=", ": ", ":"])
_WRAP = st.sampled_from(["()", "[]", '""', "''", "{}", "<>"])
_AFTER = st.sampled_from([",", ";", ")", ""])
_BEFORE = st.sampled_from(["", "f", "x ", "call(a, "])


@settings(max_examples=300, deadline=None)
@given(_SECRET, _NAME, _OPERATOR, _WRAP, _AFTER, _BEFORE)
def test_a_wrapped_named_secret_never_stays_in_clear(secret: str, name: str, operator: str,
                                                     wrap: str, after: str, before: str) -> None:
    assume(not re.search(r"(.)\1{7}", secret))  # eight of a kind: a placeholder
    assume(not (operator == ":" and wrap == "<>"))  # ``<token:x>``: a template's placeholder
    text = f"{before}{wrap[0]}{name}{operator}{secret}{wrap[1]}{after}"
    out = redact(text)
    assert secret not in out, out
    assert out.endswith(wrap[1] + after), out
