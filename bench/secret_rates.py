"""Detection rates on gitleaks' own test cases: the share of true positives redaction changes
and the share of false positives it changes. The tuning part only, unless asked:

    python -m bench.secret_rates [--held-out]
"""

from __future__ import annotations

import sys
from collections import Counter

from stages.log.redact import redact
from tests.stages.secret_cases import cases


def main() -> None:
    held_out = "--held-out" in sys.argv
    tps, fps = cases(held_out=held_out)
    missed = [(rule, text) for rule, text in tps if redact(text) == text]
    altered = [(rule, text) for rule, text in fps if redact(text) != text]
    part = "held-out" if held_out else "tuning"
    print(f"{part}: {len(tps) - len(missed)}/{len(tps)} true positives masked "
          f"({1 - len(missed) / len(tps):.1%}), {len(altered)}/{len(fps)} false positives "
          f"altered ({len(altered) / len(fps):.1%})")
    if not held_out and "-v" in sys.argv:
        print("missed by rule:", Counter(rule for rule, _ in missed).most_common())
        for rule, text in altered:
            print("altered", rule, repr(text[:120]), "->", repr(redact(text)[:120]))


if __name__ == "__main__":
    main()
