"""Gitleaks' default rule set (``gitleaks.toml``, vendored unchanged beside this module; see
``UPSTREAM.toml`` for its version and ``tests/corpus/secrets/refresh_gitleaks.py`` to refresh
it), loaded as frozen rules with their patterns compiled for Python's ``re``.

Rules that name a file path instead of text (``path``: a ``.p12`` file, a ``.npmrc``) say
nothing about a string and are left out; an allow-list's paths and commits likewise never
apply (there is no file or commit), as gitleaks treats a text without them.
"""

from __future__ import annotations

import functools
import re
import tomllib
from importlib import resources
from typing import Any

import attrs

from stages.log.gitleaks.translate import translate


@attrs.frozen(kw_only=True)
class Allowlist:
    """What makes a finding no secret: ``regexes`` searched in the ``target`` (the secret, the
    whole match or its line), ``stopwords`` contained in the secret (lower case). With the
    ``AND`` condition every kind listed must hold, and a listed path or commit never does."""

    regexes: tuple[re.Pattern[str], ...] = ()
    stopwords: tuple[str, ...] = ()
    # The stop words as one pattern: a thousand substring tests per finding cost more.
    stopword: re.Pattern[str] | None = attrs.field(default=None, eq=False)
    target: str = "secret"
    every: bool = False
    names_files: bool = False


@attrs.frozen(kw_only=True)
class Rule:
    id: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    entropy: float = 0.0
    secret_group: int = 0
    allowlists: tuple[Allowlist, ...] = ()
    # Built by gitleaks' GenerateSemiGenericRegex: ``identifier (with a keyword), up to 23
    # characters, an assignment operator, the value``.
    assignment: bool = False


@attrs.frozen(kw_only=True)
class RuleSet:
    rules: tuple[Rule, ...]
    allowlist: Allowlist


def _compile(pattern: str) -> re.Pattern[str]:
    # RE2 classes are ASCII; ``re``'s would take any letter of any script for ``\w``.
    return re.compile(translate(pattern), re.ASCII)


def _allowlist(raw: dict[str, Any]) -> Allowlist:
    return Allowlist(
        regexes=tuple(_compile(p) for p in raw.get("regexes", ())),
        stopwords=tuple(w.lower() for w in raw.get("stopwords", ())),
        stopword=re.compile("|".join(re.escape(w.lower()) for w in raw["stopwords"]))
        if raw.get("stopwords") else None,
        target=raw.get("regexTarget", "secret"),
        every=raw.get("condition", "OR").upper() == "AND",
        names_files=bool(raw.get("paths") or raw.get("commits")))


# The operators of gitleaks' GenerateSemiGenericRegex, as its patterns spell them.
_ASSIGNMENT = r"(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)"


def _rule(raw: dict[str, Any]) -> Rule:
    return Rule(id=raw["id"], pattern=_compile(raw["regex"]),
                assignment=_ASSIGNMENT in raw["regex"],
                keywords=tuple(k.lower() for k in raw.get("keywords", ())),
                entropy=float(raw.get("entropy", 0.0)),
                secret_group=int(raw.get("secretGroup", 0)),
                allowlists=tuple(_allowlist(a) for a in raw.get("allowlists", ())))


@functools.cache  # compiling the patterns costs tens of milliseconds: once, on first use
def rule_set() -> RuleSet:
    text = resources.files(__package__).joinpath("gitleaks.toml").read_text(encoding="utf-8")
    config = tomllib.loads(text)
    return RuleSet(
        rules=tuple(_rule(r) for r in config["rules"] if "regex" in r and "path" not in r),
        allowlist=_allowlist(config.get("allowlist", {})))
