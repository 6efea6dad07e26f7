"""Redaction throughput (MB/s) on ordinary prose (a repeated sentence, and varied prose: the
README's words in a shuffled order), source code, a README and secret-dense text.

    python -m bench.redact
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from stages.log.redact import redact
from tests.stages.redaction_corpus import SECRETS

ROOT = Path(__file__).resolve().parent.parent


def _rate(text: str, rounds: int = 5) -> float:
    """MB per second of this process's CPU time, the best of ``rounds``: the machine is shared,
    and time spent waiting for a core is not redaction's."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        redact(text)
        best = min(best, time.process_time() - start)
    return len(text.encode()) / 1e6 / best


def _varied_prose(size: int) -> str:
    """About ``size`` characters of words in the README's vocabulary, shuffled (seeded): prose
    that does not repeat one sentence, as the prefilter would like."""
    words = [w for w in (ROOT / "README.md").read_text().split() if w.isalpha()]
    draw = random.Random(7)
    out: list[str] = []
    while sum(map(len, out)) < size:
        out.append(" ".join(draw.choice(words) for _ in range(12)) + ".")
    return " ".join(out)


def main() -> None:
    samples = {
        "prose": "The quick brown fox jumps over the lazy dog. " * 20_000,
        "varied prose": _varied_prose(900_000),
        "code": (ROOT / "pipeline" / "agent.py").read_text() * 50,
        "readme": (ROOT / "README.md").read_text() * 20,
        "secret-dense": "\n".join(text for text, _ in SECRETS) * 50,
    }
    for name, text in samples.items():
        print(f"{name:>12}: {_rate(text):6.1f} MB/s over {len(text) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
