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


def find_secrets(text: str) -> list[tuple[int, int]]:
    """Where the secrets of ``text`` stand, as (start, end) spans, in order, not overlapping."""
    lowered = text.lower()
    # No keyword holds white space, so one that occurs occurs in a chunk between white space:
    # testing the distinct chunks is testing the text, and prose repeats its words.
    chunks = "\n".join(set(lowered.split()))
    found: dict[str, tuple[Rule, list[str]]] = {}
    for keyword, keyed in _by_keyword():
        if keyword in chunks:
            for rule in keyed:
                found.setdefault(rule.id, (rule, []))[1].append(keyword)
    spans = [span for rule, keywords in found.values()
             for window in _windows(lowered, keywords) for span in _findings(rule, text, window)]
    return _disjoint(spans)


def _windows(lowered: str, keywords: list[str]) -> list[tuple[int, int]]:
    """The stretches of text around each occurrence of ``keywords``, merged where they meet."""
    windows = []
    for keyword in keywords:
        at = lowered.find(keyword)
        while at >= 0:
            line_end = lowered.find("\n", at)
            next_end = -1 if line_end < 0 else lowered.find("\n", line_end + 1)
            end = len(lowered) if next_end < 0 else next_end
            windows.append((max(lowered.rfind("\n", 0, at) + 1, at - _BEFORE),
                            min(end, at + _AFTER)))
            at = lowered.find(keyword, at + 1)
    return _disjoint(windows, touching=True)


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
        if _allowed(rule_set().allowlist, secret, match, text) or any(
                _allowed(a, secret, match, text) for a in rule.allowlists):
            continue
        found.append((start, end))
    return found


def _secret_group(rule: Rule, match: re.Match[str]) -> int:
    if rule.secret_group:
        return rule.secret_group
    return next((i for i, g in enumerate(match.groups(), 1) if g), 0)


def _allowed(allowlist: Allowlist, secret: str, match: re.Match[str], text: str) -> bool:
    target = {"match": match.group(), "line": _line(text, *match.span())}.get(
        allowlist.target, secret)
    checks = []
    if allowlist.names_files:
        checks.append(False)  # a text is no file, of no commit
    if allowlist.regexes:
        checks.append(any(p.search(target) for p in allowlist.regexes))
    if allowlist.stopwords:
        lowered = secret.lower()
        checks.append(any(w in lowered for w in allowlist.stopwords))
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
