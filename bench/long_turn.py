"""The long-turn figures of issue 27: one user turn of N tool calls on a small window, in each
API mode, against the in-tree fake servers (``tests/pipeline/long_turn_scenario.py``).

    uv run python bench/long_turn.py              # 300 calls on a 4,000-token window
    uv run python bench/long_turn.py --calls 100 --window 2000

For each mode, told the window and not (learning it from the server's refusal): the
compressions, the summaries written, the requests refused, the largest request against the
window, the largest and the final summary (characters), and the wall time. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.pipeline.long_turn_scenario import MODES, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--window", type=int, default=4_000)
    args = parser.parse_args()
    print(f"{args.calls} calls, window {args.window} tokens, load {os.getloadavg()[0]:.1f}")
    print(f"{'mode':<20}{'window':<8}{'done':>5}{'compr':>7}{'summ':>6}{'refused':>8}"
          f"{'largest':>9}{'max sum':>9}{'final':>7}{'secs':>7}")
    for mode in MODES:
        for told in (True, False):
            if told and mode == "llamacpp":  # the chat fake again: only its refusal differs
                continue
            with tempfile.TemporaryDirectory() as home:
                o = run(mode, Path(home), window=args.window, calls=args.calls, told=told)
            sizes = [len(c.summary or "") for c in o.compressions]
            print(f"{mode:<20}{'told' if told else 'learnt':<8}{o.result['completed']!s:>5}"
                  f"{len(o.compressions):>7}{o.summaries:>6}{o.refused:>8}{o.largest:>9}"
                  f"{max(sizes, default=0):>9}{len(o.final_summary):>7}{o.seconds:>7.1f}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
