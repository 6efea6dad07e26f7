"""Gitleaks' own test cases (tests/corpus/secrets), split into a tuning part and a held-out
part: every fifth rule family, in the order of their names, is held out."""

from __future__ import annotations

import json
from pathlib import Path

CASES = Path(__file__).resolve().parent.parent / "corpus" / "secrets" / "gitleaks_cases.json"


def families(*, held_out: bool) -> list[dict[str, object]]:
    document = json.loads(CASES.read_text(encoding="utf-8"))
    ordered = sorted(document["families"], key=lambda f: f["family"])
    return [f for index, f in enumerate(ordered) if (index % 5 == 4) == held_out]


def cases(*, held_out: bool) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(rule id, text) of the true positives and of the false positives."""
    tps, fps = [], []
    for family in families(held_out=held_out):
        for rule in family["rules"]:  # type: ignore[attr-defined]
            tps += [(rule["id"], text) for text in rule["tps"]]
            fps += [(rule["id"], text) for text in rule["fps"]]
    return tps, fps
