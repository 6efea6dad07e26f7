"""The cost of a checkpoint of the working tree and of a rollback, on a tree of 10,000 files
(``effects.tools.checkpoints``: a shadow git repository under the home).

    python -m bench.checkpoint [--files 10000] [--rounds 5]

Measured, each the median of ``--rounds`` runs (first: of fresh homes):

* first checkpoint: a new shadow repository, every file hashed and stored;
* incremental, unchanged: a checkpoint of the same tree (one ``lstat`` pass over the index);
* incremental, 10 files changed: what a turn that edits a few files costs;
* rollback: save the tree as it is, then restore the checkpoint before 100 changed, 10
  created and 10 deleted files.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from effects.tools.checkpoints import CheckpointStore


def make_tree(root: Path, files: int) -> None:
    """``files`` small source-like files in 100 directories, 1 % of them binary."""
    for i in range(files):
        directory = root / f"pkg{i % 100:03d}"
        directory.mkdir(exist_ok=True)
        if i % 100 == 0:
            (directory / f"blob{i}.bin").write_bytes(os.urandom(4096))
        else:
            (directory / f"mod{i}.py").write_text(f"# module {i}\n" + "x = 1\n" * 40)


def _files(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("*.py"))


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def measure(files: int, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"first": [], "unchanged": [], "10 changed": [],
                                     "rollback": []}
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        tree.mkdir()
        make_tree(tree, files)
        sources = _files(tree)
        for n in range(rounds):
            store = CheckpointStore(Path(scratch) / f"home{n}" / "checkpoints")
            times["first"].append(_timed(partial(store.take, tree, "first")))
            times["unchanged"].append(_timed(partial(store.take, tree, "again")))
            for path in sources[n * 10:(n + 1) * 10]:
                path.write_text(path.read_text() + f"y = {n}\n")
            times["10 changed"].append(_timed(partial(store.take, tree, "ten")))
            before = store.take(tree, "before the turn").commit
            for path in sources[:100]:
                path.write_text("changed\n")
            for i in range(10):
                (tree / "pkg000" / f"new{n}_{i}.py").write_text("new\n")
                sources[200 + n * 10 + i].unlink()
            times["rollback"].append(_timed(partial(store.restore, tree, before)))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"tree of {args.files} files, {args.rounds} rounds, load average "
          f"{os.getloadavg()[0]:.2f}")
    for name, values in measure(args.files, args.rounds).items():
        print(f"{name:>12}: median {statistics.median(values):8.1f} ms  "
              f"(min {min(values):.1f}, max {max(values):.1f})")


if __name__ == "__main__":
    main()
