"""An ``&`` after a secret's name: a URL query's or a form's next parameter starts there, but
in prose or a shell command it is a part of the password, which is masked whole."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stages.log.redact import mask, redact


@pytest.mark.parametrize(("text", "expected"), [
    ("password=Tr0ub4dor&3", "password=***"),
    ("my password=Tr0ub4dor&3 ok", "my password=*** ok"),
    ("export DB_PASSWORD=Tr0ub4dor&3", "export DB_PASSWORD=***"),
    ("PASSWORD=Tr0ub4dor&3;", "PASSWORD=***;"),
    ("API_KEY=Xk9mP2qR7sT4&uV8wY1zA3", f"API_KEY={mask('Xk9mP2qR7sT4&uV8wY1zA3')}"),
])
def test_a_password_with_an_ampersand_is_masked_whole(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("https://x.example/login?user=bob&password=hunter22&next=/home",
     "https://x.example/login?user=bob&password=***&next=/home"),
    ("user=bob&password=hunter22&remember=1", "user=bob&password=***&remember=1"),
    ('<a href="/login?password=hunter22&amp;next=1">', '<a href="/login?password=***&amp;next=1">'),
    ("password=hunter22&a&token=zzzz9999", "password=***&token=***"),
])
def test_a_query_s_next_parameter_ends_the_value(text: str, expected: str) -> None:
    assert redact(text) == expected


# A password of a person: letters, a digit, and what a shell or prose leaves in one word.
_PASSWORD = st.from_regex(r"[A-Za-z]{2,8}[0-9][A-Za-z0-9!@^&]{0,10}&[A-Za-z0-9!@^]{1,6}",
                          fullmatch=True)
_AROUND = st.sampled_from([("", ""), ("my ", " ok"), ("export DB_", ""), ("echo ", " | x"),
                           ("sshpass ", " ssh host"), ("[", " ]")])


@settings(max_examples=200, deadline=None)
@given(_PASSWORD, _AROUND)
def test_a_password_in_prose_or_a_shell_is_masked_whole(password: str,
                                                        around: tuple[str, str]) -> None:
    assume(not re.search(r"(.)\1{7}", password))  # eight of a kind: a placeholder
    before, after = around
    assert redact(f"{before}password={password}{after}") == (
        f"{before}password={mask(password)}{after}")


_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not re.search(r"key|secret|token|pass|pwd|credential|auth|pat|sig|code", n))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_NAME, st.from_regex(r"[A-Za-z0-9./-]{0,10}", fullmatch=True)),
                max_size=4),
       st.integers(0, 4), st.from_regex(r"[A-Za-z]{2,8}[0-9][A-Za-z0-9!@^]{1,8}",
                                        fullmatch=True))
def test_a_query_s_other_parameters_stay_intact(others: list[tuple[str, str]], at: int,
                                               password: str) -> None:
    assume(not re.search(r"(.)\1{7}", password))
    params = [f"{name}={value}" for name, value in others]
    params.insert(min(at, len(params)), f"password={password}")
    url = "https://x.example/login?" + "&".join(params)
    out = redact(url)
    assert out == url.replace(f"password={password}", f"password={mask(password)}")
