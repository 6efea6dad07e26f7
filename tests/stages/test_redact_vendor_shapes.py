"""A vendor's prefix says what its keys look like (stages/log/gitleaks/shapes.py): a
placeholder, an example or a value cut short under a vendor's prefix stays readable;
a key of the vendor's shape beside it is masked."""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stages.log.gitleaks.rules import rule_set
from stages.log.gitleaks.scan import entropy, findings
from stages.log.gitleaks.shapes import counted_share, literal_prefixes, misfits_vendor
from stages.log.redact import redact

_ALNUM = string.ascii_letters + string.digits
# Drawn at random once (not a pattern a person would type).
_NOTION = "ntn_48213907561" + "q7ZkR2mXwT9pLc4vNb8HdY1sJf6GaE3uK0o"
_DAPI = "dapi" + "7f3c91a0b4e85d26c1f09e7a3b5d48c2"
_XOXP = "xoxp-4829173650-5931827364-1029384756-7c1e9a3f5b2d8e0a4c6f1b9d3e7a5c2f"


@pytest.mark.parametrize(("placeholder", "key"), [
    # AWS's documented example key (gitleaks' rule allows ``.+EXAMPLE$``)
    ("aws_access_key: AKIAIOSFODNN7EXAMPLE", "aws_access_key: AKIAQ3EGRW7YVJ4XLN2P"),
    # counting digits under a vendor's prefix, of another shape than the vendor's
    ("ntn_123456789012345678901234567890123456789012345678901234567890", _NOTION),
    ('"token1": "xoxp-1234567890"', f'"token1": "{_XOXP}"'),
    ('"token3": "xoxp-1234-1234-1234-4ddbc191d40ee098cbaae6f3523ada2d"', f'"token3": "{_XOXP}"'),
    ("DATABRICKS_TOKEN=dapi123456789012345678a9bc01234defg5", f"DATABRICKS_TOKEN={_DAPI}"),
    ("sk-ant-api03-abc123xyz-456de-klMnopqrstuvwx-3456yza789bcde-1234fghijklmnopAA",
     "sk-ant-api03-" + "Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ" * 3 + "Xk9mP2qR7sAA"),
    # cut short to be shown
    ("export OP_SERVICE_ACCOUNT_TOKEN=ops_eyJzaWduSW5BZGRyZXNzIjoiaHR0cHM6...",
     "export OP_SERVICE_ACCOUNT_TOKEN=ops_eyJ" + "zaWduSW5BZGRyZXNzIjoiaHR0cHM6Ly9teS4x" * 8),
])
def test_a_vendor_placeholder_stays_and_a_key_of_the_vendors_shape_is_masked(
        placeholder: str, key: str) -> None:
    assert redact(placeholder) == placeholder
    assert redact(key) != key
    both = f"{placeholder}\n{key}"
    assert redact(both).split("\n")[0] == placeholder and redact(both) != both


@pytest.mark.parametrize("text", [
    # a plain value after a vendor's name: the vendor's rule does not judge every secret
    # kept under that name (a password, a key of an older shape)
    "SUMO_PASSWORD: AbCeFG123",
    "SUMO_ACCESS_KEY: AbCeFG123",
    "MERAKI_TOKEN=hunter2hunter2",
    "TELEGRAM_BOT_TOKEN=hunter2hunter2",
    'telegram_api_token = "1005:A8hx4p5jtxdoh_i5trkyoj7zz1nd2lt9v2s"',
    # random, of another length than GitHub's: a key the rule set may not know (or a test's)
    "token ghp_a1B2c3D4e5F6g7H8i9J0",
    "use sk-ant-api03-Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ-Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJAA",
    # GitHub's shape, passed only by the global allow-list's stop word (the alphabet)
    "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    # OpenAI's rule runs only on keys holding its keyword: one without is not judged by it
    "OPENAI key sk-proj-Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ",
])
def test_what_no_vendor_rule_rejects_stays_hidden(text: str) -> None:
    assert redact(text) != text


@pytest.mark.parametrize(("pattern", "heads", "folded"), [
    (r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
     {"A3T", "AKIA", "ASIA", "ABIA", "ACCA"}, False),
    (r"xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}", {"xoxp", "xoxe"}, False),
    (r"(?i)\b(sgp_(?:[a-fA-F0-9]{16}|local)_[a-f0-9]{40})", {"sgp_", "sgp_local"}, True),
    (r"(?i)[\w.-]{0,50}?(?:telegr)(?:[ \t\w.-]{0,20})[:=]([0-9]{5,16})", {""}, True),
])
def test_the_literal_start_of_a_rule_is_read_off_its_pattern(
        pattern: str, heads: set[str], folded: bool) -> None:
    assert literal_prefixes(pattern) == (frozenset(heads), folded)


def test_counting_runs_are_measured_in_runs_of_four() -> None:
    assert counted_share("123456789") == 1.0
    assert counted_share("1234567890") == 0.9  # 0 does not follow 9
    assert counted_share("AbCdxyz") == 4 / 7  # case aside; "xyz" is three
    assert counted_share("q7ZkR2mXwT9pLc4v") == 0.0
    assert counted_share("") == 0.0


# Vendor shapes whose rules need nothing around the key: (prefix, body length, alphabet).
_SHAPES = [("ghp_", 36, _ALNUM), ("dapi", 32, "0123456789abcdef"),
           ("glpat-", 20, _ALNUM + "_-"), ("ntn_48213907561", 35, _ALNUM)]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_SHAPES), st.data())
def test_a_random_key_of_a_vendors_shape_is_always_masked(
        shape: tuple[str, int, str], data: st.DataObject) -> None:
    prefix, size, alphabet = shape
    body = data.draw(st.text(alphabet=alphabet, min_size=size, max_size=size))
    assume(entropy(prefix + body) > 4.0)  # as random as a drawn key is
    key = prefix + body
    assert not misfits_vendor(key)
    assert key not in redact(f"the key: {key} here")


_COUNTING = "0123456789" * 8 + string.ascii_lowercase * 3


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["ntn_", "xoxp-", "dapi", "ghp_", "glpat-", "sk-ant-api03-", "AIza"]),
       st.integers(0, 25), st.integers(8, 60))
def test_a_counting_placeholder_under_a_vendors_prefix_that_its_rule_rejects_is_kept(
        prefix: str, start: int, size: int) -> None:
    value = prefix + _COUNTING[start:start + size]
    rules = [r for r in rule_set().rules if any(k in value.lower() for k in r.keywords)
             and r.id != "generic-api-key"]
    assume(not any(findings(rule, value) for rule in rules))
    assert misfits_vendor(value)
    assert redact(f"value: {value}") == f"value: {value}"
