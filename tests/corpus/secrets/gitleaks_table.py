"""Write ``stages/log/gitleaks/table.py``, gitleaks' rule set as a Python table, from the
vendored ``stages/log/gitleaks/gitleaks.toml``:

    python tests/corpus/secrets/gitleaks_table.py

The stages are pure and read no file: they import the table. ``refresh_gitleaks.py`` runs this
after copying a newer rule file; ``tests/stages/test_gitleaks_rules.py`` fails while the table
and the rule file disagree.
"""

from __future__ import annotations

import pprint
import tomllib
from pathlib import Path
from typing import Any

VENDORED = Path(__file__).resolve().parents[3] / "stages" / "log" / "gitleaks"
TABLE = VENDORED / "table.py"

_HEAD = '''"""Gitleaks' default rule set as a table, written from gitleaks.toml beside this module
by tests/corpus/secrets/gitleaks_table.py (do not edit by hand). Rules that name a file path, and
the paths and commits of allow-lists, are kept only as a mark (``names_files``): a text is no
file of no commit."""

# fmt: off
# ruff: noqa: E501
'''


def _allowlist(raw: dict[str, Any]) -> dict[str, Any]:
    return {"regexes": tuple(raw.get("regexes", ())),
            "stopwords": tuple(raw.get("stopwords", ())),
            "target": raw.get("regexTarget", "secret"),
            "every": raw.get("condition", "OR").upper() == "AND",
            "names_files": bool(raw.get("paths") or raw.get("commits"))}


def _rule(raw: dict[str, Any]) -> dict[str, Any]:
    return {"id": raw["id"], "regex": raw["regex"],
            "keywords": tuple(raw.get("keywords", ())),
            "entropy": float(raw.get("entropy", 0.0)),
            "secret_group": int(raw.get("secretGroup", 0)),
            "allowlists": tuple(_allowlist(a) for a in raw.get("allowlists", ()))}


def render(toml_text: str) -> str:
    """The table's module text for a gitleaks configuration."""
    config = tomllib.loads(toml_text)
    rules = tuple(_rule(r) for r in config["rules"] if "regex" in r and "path" not in r)
    allowlist = _allowlist(config.get("allowlist", {}))
    return (_HEAD + "\nRULES = " + pprint.pformat(rules, width=100, sort_dicts=False)
            + "\n\nALLOWLIST = " + pprint.pformat(allowlist, width=100, sort_dicts=False)
            + "\n")


def main() -> None:
    TABLE.write_text(render((VENDORED / "gitleaks.toml").read_text(encoding="utf-8")),
                     encoding="utf-8")


if __name__ == "__main__":
    main()
