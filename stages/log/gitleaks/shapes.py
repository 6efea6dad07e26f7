"""What a vendor's prefix or name says about a value, by gitleaks' rules.

A vendor's token announces itself by its literal prefix (``xoxp``, ``ntn_``, Anthropic's,
``AKIA``, ``dapi``), and the vendor's rule says what follows it: its shape, its randomness, the
published examples it allows (``.+EXAMPLE$``). A value that starts with such a prefix and holds
the rule's keyword (so gitleaks runs the rule on it), but that the vendor's rule rejects as an
example, or whose shape it does not match while it counts like a hand-typed placeholder
(``ntn_1234567890...``), is no key of that vendor. Shapes that guess from a prefix alone
(redaction's own list, gitleaks' generic rule) are overruled by the vendor's rule there.

The prefixes are read off the rules' patterns (the literal text every match starts with), so
they follow the vendored rule set; a prefix shorter than four characters, or one a hex string
may start with, says too little to overrule anything.
"""

from __future__ import annotations

import functools
import itertools
import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

from stages.log.gitleaks.rules import Rule, rule_set
from stages.log.gitleaks.scan import findings
from stages.log.gitleaks.translate import translate

_SHORTEST = 4
# Alternatives followed this far: a class of a few letters (``xox[pe]``) widens the prefixes,
# a wider class ends them.
_WIDEST = 64
_HEX = re.compile(r"[0-9a-fA-F]*")


def literal_prefixes(pattern: str) -> tuple[frozenset[str], bool]:
    """The literal texts a match of ``pattern`` (RE2 syntax) starts with, and whether they are
    compared case aside (the pattern's ``(?i)`` holds from its start)."""
    parsed = _parser.parse(translate(pattern))
    heads, _ = _heads(list(parsed))
    folded = bool(parsed.state.flags & re.IGNORECASE)
    return frozenset(h.lower() if folded else h for h in heads), folded


def _heads(items: list[Any]) -> tuple[set[str], bool]:
    """The literal starts of a parsed sequence, and whether the sequence is all literal."""
    heads = {""}
    for op, arg in items:
        if op is sre.AT:  # \b, ^: no character
            continue
        if op is sre.LITERAL:
            heads = {h + chr(arg) for h in heads}
            continue
        if op is sre.IN and all(kind is sre.LITERAL for kind, _ in arg):
            tails = {chr(char) for _, char in arg}
            complete = True
        elif op is sre.SUBPATTERN and not arg[1] & re.IGNORECASE:
            tails, complete = _heads(list(arg[3]))
        elif op is sre.BRANCH:
            branches = [_heads(list(branch)) for branch in arg[1]]
            tails = {t for branch, _ in branches for t in branch}
            complete = all(whole for _, whole in branches)
        else:
            return heads, False
        if len(heads) * len(tails) > _WIDEST:
            return heads, False
        heads = {h + t for h in heads for t in tails}
        if not complete:
            return heads, False
    return heads, True


@functools.cache
def _claims() -> tuple[tuple[Rule, tuple[str, ...], bool], ...]:
    """Each vendor rule whose matches start with a telling prefix: the rule, its prefixes,
    whether they are compared case aside."""
    claims = []
    for rule in rule_set().rules:
        if rule.id == "generic-api-key":
            continue
        heads, folded = literal_prefixes(rule.regex)
        telling = tuple(sorted(h for h in heads if len(h) >= _SHORTEST
                               and not _HEX.fullmatch(h) and not "https://".startswith(h[:8])))
        if telling:
            claims.append((rule, telling, folded))
    return tuple(claims)


@functools.cache
def _all_prefixes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every telling prefix, compared as written and case aside: one test rejects most values."""
    exact = tuple(h for _, heads, folded in _claims() if not folded for h in heads)
    folded = tuple(h for _, heads, case_aside in _claims() if case_aside for h in heads)
    return exact, folded


def misfits_vendor(value: str) -> bool:
    """Whether ``value`` starts with a vendor's prefix and holds its rule's keyword, yet is no
    key of that vendor: a rule of that prefix matches it and the rule's own allow-list or
    entropy threshold rejects it (a published example, a plain value); or none matches it and
    a quarter of what follows the prefix counts (``1234``, ``abcd``) as a hand-typed
    placeholder does, or it ends in an ellipsis. A value of another shape that looks drawn at
    random may be a key the rule set does not know yet (or a test's): it stays hidden."""
    lowered = value.lower()
    exact, folded = _all_prefixes()
    if not (value.startswith(exact) or lowered.startswith(folded)):
        return False
    claiming = [(rule, head) for rule, heads, case_aside in _claims()
                for head in heads if (lowered if case_aside else value).startswith(head)
                and any(k in lowered for k in rule.keywords)]
    # A key of the vendor's shape that only the global allow-list passes (a stop word such as
    # the alphabet) is still the vendor's: the vendor's rule itself accepts it.
    if not claiming or any(findings(rule, value, everywhere=False) for rule, _ in claiming):
        return False
    body = value[max(len(head) for _, head in claiming):]
    return (any(rule.pattern.search(value) for rule, _ in claiming)
            or counted_share(body) >= _COUNTED or value.endswith(_ELLIPSES))


# A value cut short to be shown (``ops_eyJzaWdu...``): what its writer chose to show.
_ELLIPSES = ("...", "\u2026")


# A quarter of a value in counting runs (``1234``, ``abcd``, ``klmnop``) was typed by a person:
# a random body of letters and digits holds a run of four about once in 30,000 places.
_COUNTED = 0.25
_RUN = 4


def counted_share(value: str) -> float:
    """The share of ``value``'s characters that stand in runs of four or more letters or digits
    in counting order, case aside."""
    lowered = value.lower()
    counted, run = 0, 1
    for previous, char in itertools.pairwise(lowered):
        if char.isalnum() and ord(char) == ord(previous) + 1:
            run += 1
            continue
        counted += run if run >= _RUN else 0
        run = 1
    counted += run if run >= _RUN else 0
    return counted / len(value) if value else 0.0
