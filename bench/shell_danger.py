"""The dangerous-command check: microseconds per command and the corpus's rates, for the shell
reader of rules 7 and the regex table of rules 3 to 6, on the same commands.

    uv run python -m bench.shell_danger

Rates: catastrophic commands blocked (hard), destructive ones asked about or blocked, ordinary
ones flagged at all (false positives), over ``tests/stages/shell_corpus.py``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from stages.tools import dangerous_patterns, shell
from stages.tools.danger import Danger
from tests.stages.shell_corpus import CATASTROPHIC, DESTRUCTIVE, ORDINARY

Detect = Callable[[str], Danger | None]


def _timings(detect: Detect, commands: list[str], rounds: int) -> list[float]:
    """Microseconds per call of each command, the best of ``rounds`` runs."""
    best = [float("inf")] * len(commands)
    for _ in range(rounds):
        for i, command in enumerate(commands):
            start = time.perf_counter()
            detect(command)
            best[i] = min(best[i], time.perf_counter() - start)
    return [b * 1e6 for b in best]


def _rates(detect: Detect) -> tuple[int, int, int]:
    blocked = sum(1 for c, _ in CATASTROPHIC if (d := detect(c)) is not None and d.hard)
    caught = sum(1 for c, _ in DESTRUCTIVE if detect(c) is not None)
    flagged = sum(1 for c in ORDINARY if detect(c) is not None)
    return blocked, caught, flagged


def main() -> None:
    commands = [c for c, _ in CATASTROPHIC] + [c for c, _ in DESTRUCTIVE] + ORDINARY
    long = " && ".join(ORDINARY[:40])  # one long command line of 40 ordinary commands
    print(f"corpus: {len(CATASTROPHIC)} catastrophic, {len(DESTRUCTIVE)} destructive, "
          f"{len(ORDINARY)} ordinary")
    for name, detect in (("shell reader (rules 7)", shell.detect),
                         ("regex table (rules 3-6)", dangerous_patterns.detect)):
        times = _timings(detect, commands, rounds=20)
        ordinary = _timings(detect, ORDINARY, rounds=20)
        (long_time,) = _timings(detect, [long], rounds=20)
        p95 = statistics.quantiles(times, n=20)[-1]
        blocked, caught, flagged = _rates(detect)
        print(f"\n{name}")
        print(f"  per command: median {statistics.median(times):7.1f} us, p95 {p95:7.1f} us, "
              f"max {max(times):7.1f} us; ordinary median {statistics.median(ordinary):.1f} us")
        print(f"  one line of 40 commands ({len(long)} chars): {long_time:.0f} us")
        print(f"  catastrophic blocked: {blocked}/{len(CATASTROPHIC)} "
              f"({100 * blocked / len(CATASTROPHIC):.0f} %)")
        print(f"  destructive caught:   {caught}/{len(DESTRUCTIVE)} "
              f"({100 * caught / len(DESTRUCTIVE):.0f} %)")
        print(f"  ordinary flagged:     {flagged}/{len(ORDINARY)} "
              f"({100 * flagged / len(ORDINARY):.1f} % false positives)")


if __name__ == "__main__":
    main()
