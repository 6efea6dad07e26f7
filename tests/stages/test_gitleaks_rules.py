"""The vendored gitleaks rule set: every rule is loaded from the generated table, which matches
the vendored rule file; the allow-lists' RE2 forms are translated to patterns matching the same
texts, and the keyword prefilter sees what the text holds."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from stages.log.gitleaks.prefilter import Literals
from stages.log.gitleaks.rules import rule_set
from stages.log.gitleaks.scan import entropy, find_secrets
from stages.log.gitleaks.translate import translate
from tests.corpus.secrets.gitleaks_table import TABLE, render

VENDORED = Path(__file__).resolve().parents[2] / "stages" / "log" / "gitleaks"


def test_every_text_rule_of_the_vendored_set_is_loaded() -> None:
    raw = tomllib.loads((VENDORED / "gitleaks.toml").read_text(encoding="utf-8"))["rules"]
    text_rules = [r for r in raw if "regex" in r and "path" not in r]
    assert len(text_rules) >= 200
    assert {r.id for r in rule_set().rules} == {r["id"] for r in text_rules}
    upstream = tomllib.loads((VENDORED / "UPSTREAM.toml").read_text(encoding="utf-8"))
    assert re.fullmatch(r"[0-9a-f]{40}", upstream["commit"])
    assert "MIT License" in (VENDORED / "LICENSE").read_text(encoding="utf-8")


@pytest.mark.parametrize(("re2", "python", "matches", "misses"), [
    # A flag group in the middle holds to the end of its group, as RE2 reads it.
    (r"\b(p8e-(?i)[a-z0-9]{4})x", r"\b(p8e-(?i:[a-z0-9]{4}))x", "p8e-AbC1x", "P8E-abc1x"),
    (r"a(?i)b|c", r"a(?i:b|c)", "aB", "C"),
    (r"[[:alnum:]]{3}\z", r"[a-zA-Z0-9]{3}\Z", "aZ9", "a-9"),
    (r"[]a]+", r"[]a]+", "]a", "b"),
    (r"(?i)key(?-i:[A-Z])", r"(?i)key(?-i:[A-Z])", "KEYZ", "keyz"),
])
def test_re2_forms_are_translated_to_the_same_language(re2: str, python: str, matches: str,
                                                      misses: str) -> None:
    assert translate(re2) == python
    pattern = re.compile(translate(re2), re.ASCII)
    assert pattern.fullmatch(matches) and not pattern.fullmatch(misses)


def test_the_generated_table_is_the_vendored_rule_file() -> None:
    """The stages read the table, not the file: a refreshed rule file needs its table."""
    toml = (VENDORED / "gitleaks.toml").read_text(encoding="utf-8")
    assert TABLE.read_text(encoding="utf-8") == render(toml)


def test_the_prefilter_sees_a_keyword_exactly_when_the_text_holds_it() -> None:
    text = "one two\tGHP_ three\nxoxb-four ünï"
    literals = Literals(("ghp_", "xoxb-", "two", "two ghp_", "absent", "ünï", "zz"))
    assert literals.present(text) == {"ghp_", "xoxb-", "two", "ünï"}
    assert literals.present("") == frozenset()


def test_entropy_is_shannon_bits_per_character() -> None:
    assert entropy("aaaa") == 0
    assert entropy("ab") == 1
    assert entropy("0123456789abcdef") == 4


def test_a_finding_is_the_secret_not_its_name_and_honours_the_thresholds() -> None:
    text = 'config.api_token = "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB"\nkey = "aaaaaaaaaaaaaaaaaa"'
    (span,) = find_secrets(text)
    assert text[slice(*span)] == "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB"  # the low-entropy one stays
