"""Secrets in a text, found as gitleaks finds them in a file.

A rule runs only when one of its keywords occurs in the lower-cased text (gitleaks' prefilter,
which keeps ordinary prose fast), and only around where it occurs; each match gives its secret
(the rule's secret group, else the first capture group that matched), which must be more random
than the rule's entropy threshold and allowed by neither the global allow-list nor the rule's.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter

import attrs

from stages.log.gitleaks.rules import Allowlist, Rule, rule_set


@functools.cache
def _by_keyword() -> tuple[tuple[str, tuple[Rule, ...]], ...]:
    table: dict[str, list[Rule]] = {}
    for rule in rule_set().rules:
        for keyword in rule.keywords:
            table.setdefault(keyword, []).append(rule)
    return tuple((k, tuple(rules)) for k, rules in table.items())


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character, as gitleaks computes it."""
    counts = Counter(text)
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


# A match starts at most this far before its keyword (an identifier's head, gitleaks' generic
# ``[\w.-]{0,50}?``) and ends on the keyword's line or the next (a value after ``>`` and a line
# break, as in XML), and within this many characters after it.
_BEFORE, _AFTER = 60, 4096


def chunks(text: str) -> str:
    """The distinct pieces of lower-cased ``text`` between white space, one a line. A keyword
    holds no white space, so it occurs in the text if and only if it occurs in these, and
    prose repeats its words: testing the chunks is testing the text, at a fraction of it."""
    return "\n".join(set(text.lower().split()))


def find_secrets(text: str, pieces: str | None = None) -> list[tuple[int, int]]:
    """Where the secrets of ``text`` stand, as (start, end) spans, in order, not overlapping
    (``pieces``: its :func:`chunks`, if known)."""
    lowered = text.lower()
    pieces = chunks(text) if pieces is None else pieces
    found: dict[str, tuple[Rule, list[str]]] = {}
    for keyword, keyed in _by_keyword():
        if keyword in pieces:
            for rule in keyed:
                found.setdefault(rule.id, (rule, []))[1].append(keyword)
    spans = [span for rule, keywords in found.values()
             for window in _windows(lowered, keywords, rule.assignment)
             for span in _findings(rule, text, window)]
    return _disjoint(spans)


# In an assignment rule's match the operator follows its keyword within this many characters
# (``(?:[ \t\w.-]{0,20})[\s'"]{0,3}``).
_TO_OPERATOR = 24
_OPERATORS = re.compile(r"[=>:,|]")


def _windows(lowered: str, keywords: list[str], assignment: bool) -> list[tuple[int, int]]:
    """The stretches of text around each occurrence of ``keywords``, merged where they meet;
    for an assignment rule, only around those an operator follows closely (prose names keys
    and tokens all the time, and rarely assigns them)."""
    windows = []
    for keyword in keywords:
        at = lowered.find(keyword)
        while at >= 0:
            after = at + len(keyword)
            if not assignment or _OPERATORS.search(lowered, after, after + _TO_OPERATOR):
                windows.append(_window(lowered, at))
            at = lowered.find(keyword, at + 1)
    return _disjoint(windows, touching=True)


def _window(lowered: str, at: int) -> tuple[int, int]:
    """From the start of the keyword's line (at most ``_BEFORE`` back) to the end of the next
    line (at most ``_AFTER`` on); the searches are bounded so that a text of one long line
    costs no more than one of many."""
    start = max(lowered.rfind("\n", max(0, at - _BEFORE), at) + 1, at - _BEFORE)
    limit = min(len(lowered), at + _AFTER)
    line_end = lowered.find("\n", at, limit)
    next_end = -1 if line_end < 0 else lowered.find("\n", line_end + 1, limit)
    return start, limit if next_end < 0 else next_end


def _findings(rule: Rule, text: str, window: tuple[int, int]) -> list[tuple[int, int]]:
    found = []
    for match in rule.pattern.finditer(text, *window):
        group = _secret_group(rule, match)
        start, end = match.span(group)
        secret = match.group(group).strip("\n")
        if group == 0:
            start = match.start() + match.group().index(secret)
            end = start + len(secret)
        if not secret or (rule.entropy and entropy(secret) <= rule.entropy):
            continue
        line = _line(text, *match.span())
        if _allowed(rule_set().allowlist, secret, match.group(), line) or any(
                _allowed(a, secret, match.group(), line) for a in rule.allowlists):
            continue
        found.append((start, end))
    return found


def _secret_group(rule: Rule, match: re.Match[str]) -> int:
    if rule.secret_group:
        return rule.secret_group
    return next((i for i, g in enumerate(match.groups(), 1) if g), 0)


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
    return attrs.evolve(allowlist, stopwords=(), stopword=None)


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


def _disjoint(spans: list[tuple[int, int]], touching: bool = False) -> list[tuple[int, int]]:
    """The spans merged where they overlap (two rules finding one secret, or parts of it), or
    also where they touch."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and (start < merged[-1][1] or (touching and start == merged[-1][1])):
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
