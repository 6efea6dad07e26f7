"""Gitleaks' patterns are compiled when a rule first runs, never all with the set: compiling the
217 rules and their allow-lists cost a process's first redaction about 0.3 s, while a text
reaches a rule only when the prefilter finds one of its keywords."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from stages.log.gitleaks import rules, scan
from stages.log.redact import redact
from stages.log.redact import text as redact_text


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The patterns compiled from now on (RE2 rules and ``re`` allow-lists), in a fresh set."""
    seen: list[str] = []
    real_re2, real_re = rules.re2.compile, rules._compile

    def re2_compile(pattern: str) -> object:
        seen.append(pattern)
        return real_re2(pattern)

    def re_compile(pattern: str) -> object:
        seen.append(pattern)
        return real_re(pattern)

    monkeypatch.setattr(rules, "re2", SimpleNamespace(compile=re2_compile))
    monkeypatch.setattr(rules, "_compile", re_compile)
    for cached in (rules.rule_set, scan._by_keyword, scan._keywords, redact_text._literals):
        cached.cache_clear()
    return seen


def test_building_the_rule_set_and_its_prefilter_compiles_no_rule(compiled: list[str]) -> None:
    assert len(rules.rule_set().rules) >= 200
    assert scan.keywords()
    assert redact("The meeting moved to Thursday, bring a pen") == (
        "The meeting moved to Thursday, bring a pen")
    assert compiled == []


def test_a_keyword_compiles_only_the_rules_it_names_and_once(compiled: list[str]) -> None:
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
    text = f"the token is {token} here"
    assert token not in redact(text)
    # Only rules whose keyword the text holds ran: their patterns and allow-lists.
    ran = [r for r in rules.rule_set().rules if any(k in text.lower() for k in r.keywords)]
    allowed = {p for a in (rules.rule_set().allowlist, *(a for r in ran for a in r.allowlists))
               for p in a.sources}
    assert "ghp_[0-9a-zA-Z]{36}" in compiled
    assert set(compiled) <= {r.regex for r in ran} | allowed
    assert len(ran) < 10
    first = list(compiled)
    assert token not in redact(text)
    assert compiled == first  # the compiled patterns are kept
    # Every pattern still means what it meant: the rule finds the token where it stands.
    assert scan.find_secrets(text) == [(text.index(token), text.index(token) + len(token))]

