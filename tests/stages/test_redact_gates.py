"""Redaction's own patterns run only on the lines their RE2 gates find something in
(``stages.log.gated``), and gitleaks' rules only when the one-pass prefilter finds a keyword:
both must change nothing in what redaction finds, only in what it reads."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.log import command_secrets
from stages.log.gated import Gated, on_gated_lines
from stages.log.gitleaks.scan import find_secrets
from stages.log.redact import patterns
from tests.stages.redaction_corpus import ORDINARY, SECRETS

GATED = {name: value for module in (patterns, command_secrets)
         for name, value in vars(module).items() if isinstance(value, Gated)}

# Pieces of secrets, of the text around them and separators: the gates must hold for any text
# made of them, line breaks, non-ASCII letters and digits (``re``'s classes take those) too.
_PIECES = [t for t, _ in SECRETS] + ORDINARY + [
    "\n", " ", "\t", "\r\n", "ü", "٣٤٥٦٧٨٩٠١٢", "=", ":", '"', "'", "--", "?", "&", "\\n",
    "Bearer ", "Authorization: ", "token", "SK", "://", "@", "é" * 3]


def _replacement(match: re.Match[str]) -> str:
    return "<" + match.group(0).upper() + ">"


def test_every_own_pattern_has_a_gate() -> None:
    assert set(GATED) >= {"GATED_TOKEN", "GATED_USERINFO", "GATED_BEARER", "GATED_AUTH",
                          "GATED_KEY_HEADER", "GATED_TWILIO", "GATED_TELEGRAM",
                          "_GATED_FLAG", "_GATED_QUERY"}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=12))
def test_a_gated_pattern_changes_what_the_pattern_changes(pieces: list[str]) -> None:
    text = "".join(pieces)
    for name, gated in GATED.items():
        assert gated.sub(_replacement, text) == gated.pattern.sub(_replacement, text), name


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_each_gate_finds_the_corpus_secrets_its_pattern_finds(text: str, secret: str) -> None:
    del secret
    for name, gated in GATED.items():
        if gated.pattern.search(text):
            assert gated.gate.search(text), name


def test_only_the_lines_the_gate_finds_are_changed() -> None:
    from re2 import compile as re2_compile

    seen: list[str] = []
    text = "a\nkey one\nb\nkey two key three\n" + "c\n" * 40_000 + "key four"
    out = on_gated_lines(re2_compile("key"), lambda line: seen.append(line) or line.upper(), text)
    assert seen == ["key one", "key two key three", "key four"]  # one call per line
    assert out == text.replace("key one", "KEY ONE").replace(
        "key two key three", "KEY TWO KEY THREE").replace("key four", "KEY FOUR")


def test_a_secret_after_non_ascii_text_is_found_where_it_stands() -> None:
    secret = "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB"
    for before in ("", "naïve café ", "日本語 " * 300, "ü\n" * 5000):
        text = f'{before}config.api_token = "{secret}"\n'
        (span,) = find_secrets(text)
        assert text[slice(*span)] == secret
