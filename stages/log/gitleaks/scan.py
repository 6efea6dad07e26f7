"""Secrets in a text, found as gitleaks finds them in a file.

A rule runs only when one of its keywords occurs in the lower-cased text (gitleaks' prefilter:
one RE2 pass over the text for all keywords at once, which keeps ordinary prose fast), and then
over the whole text, in RE2 as gitleaks runs it; each match gives its secret (the rule's secret
group, else the first capture group that matched), which must be more random than the rule's
entropy threshold and allowed by neither the global allow-list nor the rule's.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Set
from typing import Any

import attrs

from stages.log.gitleaks.prefilter import Literals
from stages.log.gitleaks.rules import Allowlist, Rule, rule_set


@functools.cache
def _by_keyword() -> dict[str, tuple[Rule, ...]]:
    table: dict[str, list[Rule]] = {}
    for rule in rule_set().rules:
        for keyword in rule.keywords:
            table.setdefault(keyword, []).append(rule)
    return {k: tuple(rules) for k, rules in table.items()}


def keywords() -> frozenset[str]:
    """Every keyword of the rules (lower case): what :func:`find_secrets` needs to know of."""
    return frozenset(_by_keyword())


@functools.cache
def _keywords() -> Literals:
    return Literals(keywords())


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character, as gitleaks computes it."""
    counts = Counter(text)
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def find_secrets(text: str, present: Set[str] | None = None) -> list[tuple[int, int]]:
    """Where the secrets of ``text`` stand, as (start, end) spans, in order, not overlapping
    (``present``: the literals the text holds, among them every keyword it holds, if known)."""
    present = _keywords().present(text) if present is None else present
    table = _by_keyword()
    rules = {rule.id: rule for keyword in present for rule in table.get(keyword, ())}
    spans = [span for rule in rules.values() for span in findings(rule, text)]
    return _disjoint(spans) if spans else spans  # most texts: no secret to merge


def findings(rule: Rule, text: str, *, everywhere: bool = True) -> list[tuple[int, int]]:
    """Where ``rule`` finds a secret in ``text``; without the global allow-list (which holds
    for every rule) unless ``everywhere``, so that only what the rule itself allows passes."""
    found = []
    # ASCII is matched as bytes, whose offsets are the characters' (the binding converts
    # offsets of text by reading it again); only the offsets are taken from the match.
    subject: str | bytes = text.encode("ascii") if text.isascii() else text
    for match in rule.pattern.finditer(subject):
        group = _secret_group(rule, match)
        start, end = match.span(group)
        whole = text[match.start():match.end()]
        secret = text[start:end].strip("\n")
        if group == 0:
            start = match.start() + whole.index(secret)
            end = start + len(secret)
        if not secret or (rule.entropy and entropy(secret) <= rule.entropy):
            continue
        line = _line(text, match.start(), match.end())
        if (everywhere and _allowed(rule_set().allowlist, secret, whole, line)) or any(
                _allowed(a, secret, whole, line) for a in rule.allowlists):
            continue
        found.append((start, end))
    return found


def _secret_group(rule: Rule, match: Any) -> int:
    if rule.secret_group:
        return rule.secret_group
    return next((i for i, g in enumerate(match.groups(), 1) if g), 0)  # the first non-empty


@functools.cache
def _named_allowlists() -> tuple[Allowlist, ...]:
    """The patterns of the global allow-list and of those of gitleaks' generic rule that look
    at more than the value. Not the allow-list of the value alone, nor the stop words: a value
    after a secret's name may be letters only or hold a word (a password), which they pass,
    since the generic rule asks for a random value, and a named one need not be."""
    generic = next(r for r in rule_set().rules if r.id == "generic-api-key")
    return tuple(_regexes_only(a) for a in (rule_set().allowlist, *generic.allowlists)
                 if a.target != "secret" or a is rule_set().allowlist)


def _regexes_only(allowlist: Allowlist) -> Allowlist:
    return attrs.evolve(allowlist, stopwords=())


@functools.cache
def _listed_values() -> frozenset[str]:
    """The stop words of the generic rule that are whole values (published keys), not words."""
    generic = next(r for r in rule_set().rules if r.id == "generic-api-key")
    return frozenset(w for a in generic.allowlists for w in a.stopwords
                     if any(c.isdigit() for c in w))


def named_value_allowed(value: str, match: str, line: str) -> bool:
    """Whether ``value``, found after a secret's name in ``match`` on ``line``, is no secret by
    gitleaks' allow-lists for such values (a key's id or length, an author, a placeholder, a
    value the generic rule lists)."""
    return value.lower() in _listed_values() or any(
        _allowed(a, value, match, line) for a in _named_allowlists())


def vendor_token_allowed(token: str) -> bool:
    """Whether ``token``, found by its vendor's prefix, is a value that the vendor rules whose
    keyword it holds list by name as no secret (published public keys). Their patterns that
    allow a whole family of values (``.+EXAMPLE$``) are not taken: a key shaped like a real
    one is masked, which costs nothing, where a scanner of files would drown in examples."""
    lowered = token.lower()
    return any(p.pattern == token for r in _listing_rules() if any(k in lowered for k in r.keywords)
               for a in r.allowlists for p in a.regexes)


@functools.cache
def _listing_rules() -> tuple[Rule, ...]:
    return tuple(r for r in rule_set().rules if r.id != "generic-api-key" and r.allowlists)


def _allowed(allowlist: Allowlist, secret: str, match: str, line: str) -> bool:
    target = {"match": match, "line": line}.get(allowlist.target, secret)
    checks = []
    if allowlist.names_files:
        checks.append(False)  # a text is no file, of no commit
    if allowlist.regexes:
        checks.append(any(p.search(target) for p in allowlist.regexes))
    if allowlist.stopword is not None:
        checks.append(allowlist.stopword.search(secret.lower()) is not None)
    return bool(checks) and (all(checks) if allowlist.every else any(checks))


def _line(text: str, start: int, end: int) -> str:
    return text[text.rfind("\n", 0, start) + 1:(text.find("\n", end) + 1 or len(text) + 1) - 1]


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans merged where they overlap (two rules finding one secret, or parts of it)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
