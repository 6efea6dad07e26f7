"""Gitleaks' default rule set (``gitleaks.toml``, vendored unchanged beside this module; see
``UPSTREAM.toml`` for its version and ``tests/corpus/secrets/refresh_gitleaks.py`` to refresh
it), loaded from its generated table (``table.py``: the stages read no file) as frozen rules.
The rules' patterns are compiled by RE2, the engine gitleaks writes them for, so they mean
what they mean there and run in linear time; the allow-lists' patterns, which only ever see
one short secret or line, by Python's ``re`` after translation. Every pattern is compiled on
its first use, not with the set: compiling all of them costs a few hundred milliseconds, and
a text reaches a rule only when the keyword prefilter finds one of its keywords, so most
processes compile a few rules or none.

Rules that name a file path instead of text (``path``: a ``.p12`` file, a ``.npmrc``) say
nothing about a string and are left out; an allow-list's paths and commits likewise never
apply (there is no file or commit), as gitleaks treats a text without them.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import attrs
import re2

from stages.log.gitleaks import table
from stages.log.gitleaks.translate import translate


@attrs.frozen(kw_only=True)
class Allowlist:
    """What makes a finding no secret: ``regexes`` searched in the ``target`` (the secret, the
    whole match or its line), ``stopwords`` contained in the secret (lower case). With the
    ``AND`` condition every kind listed must hold, and a listed path or commit never does."""

    sources: tuple[str, ...] = ()  # the regexes as gitleaks writes them (RE2 syntax)
    stopwords: tuple[str, ...] = ()
    target: str = "secret"
    every: bool = False
    names_files: bool = False

    @functools.cached_property
    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(_compile(p) for p in self.sources)

    @functools.cached_property
    def stopword(self) -> re.Pattern[str] | None:
        """The stop words as one pattern: a thousand substring tests per finding cost more."""
        if not self.stopwords:
            return None
        return re.compile("|".join(re.escape(w) for w in self.stopwords))


@attrs.frozen(kw_only=True)
class Rule:
    id: str
    regex: str  # RE2 syntax
    keywords: tuple[str, ...]
    entropy: float = 0.0
    secret_group: int = 0
    allowlists: tuple[Allowlist, ...] = ()

    @functools.cached_property
    def pattern(self) -> Any:
        """The compiled regex (re2._Regexp: finditer, search, with re's match objects)."""
        return re2.compile(self.regex)


@attrs.frozen(kw_only=True)
class RuleSet:
    rules: tuple[Rule, ...]
    allowlist: Allowlist


def _compile(pattern: str) -> re.Pattern[str]:
    # RE2 classes are ASCII; ``re``'s would take any letter of any script for ``\w``.
    return re.compile(translate(pattern), re.ASCII)


def _allowlist(raw: dict[str, Any]) -> Allowlist:
    return Allowlist(
        sources=tuple(raw["regexes"]), stopwords=tuple(w.lower() for w in raw["stopwords"]),
        target=raw["target"], every=raw["every"], names_files=raw["names_files"])


def _rule(raw: dict[str, Any]) -> Rule:
    return Rule(id=raw["id"], regex=raw["regex"],
                keywords=tuple(k.lower() for k in raw["keywords"]),
                entropy=raw["entropy"], secret_group=raw["secret_group"],
                allowlists=tuple(_allowlist(a) for a in raw["allowlists"]))


@functools.cache
def rule_set() -> RuleSet:
    return RuleSet(rules=tuple(_rule(r) for r in table.RULES),
                   allowlist=_allowlist(table.ALLOWLIST))
