"""Checkpoints of a working tree in a shadow git repository outside it, and rollback to them.

Each tree has its own repository under ``<home>/checkpoints/<hash of the tree's path>/``, driven
with ``git --git-dir=SHADOW --work-tree=TREE``: nothing is ever written into the tree by a
checkpoint, and the tree's own ``.git`` is never read or written (git skips any ``.git`` in a
work tree). The git binary is the mechanism rather than a library (dulwich): its index keeps
the stat cache that makes a checkpoint of an unchanged 10,000-file tree cost one pass of
``lstat``, and it reads ``.gitignore`` files exactly as the user's own git does.

A checkpoint stages everything (``add -A``) except what the tree's ``.gitignore`` files, the
shadow's own excludes and the size cap leave out, and commits it. The branch only moves
forward, so every checkpoint stays reachable. A rollback first checkpoints the tree as it is
(so it can be undone), then makes the tree match the checkpoint: changed files are restored,
files created since are removed, deleted ones come back; ignored and oversized files, which no
checkpoint holds, are left alone.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from effects.logs import get_logger
from stages.errors import EffectError

__all__ = ["DEFAULT_EXCLUDES", "MAX_FILE_BYTES", "CheckpointError", "CheckpointStore",
           "Restored", "Snapshot", "TreeCheckpoints"]

log = get_logger(__name__)

# Files above this size are not snapshotted (a note says how many): a checkpoint must stay
# cheap, and large binaries are usually build outputs or data the agent did not make.
MAX_FILE_BYTES = 20 * 1024 * 1024
# Caches and environments that are rebuilt rather than restored (hermes-agent skips the same).
DEFAULT_EXCLUDES = ("node_modules/", "__pycache__/", "*.pyc", ".venv/", "venv/",
                    ".mypy_cache/", ".pytest_cache/", ".ruff_cache/", ".tox/", ".DS_Store")
GIT_TIMEOUT = 300.0
# Configuration of every call: nobody's global or system config (a signing key, hooks, an
# fsmonitor) takes part, and paths come back as they are.
_CONFIG = ("-c", "user.name=mibyan", "-c", "user.email=mibyan@localhost",
           "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false",
           "-c", "core.quotepath=false", "-c", "advice.addEmbeddedRepo=false",
           "-c", "core.fsmonitor=false")


class CheckpointError(EffectError):
    """A checkpoint or a rollback could not be made (no git, a tree that cannot be read)."""


@attrs.frozen(kw_only=True)
class Snapshot:
    commit: str
    files: int
    skipped: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Restored:
    saved: str
    removed: int
    restored: int


def _environment() -> dict[str, str]:
    """The process's environment without git's own variables (a hook's ``GIT_DIR`` would
    point the shadow's commands at the user's repository)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0",
               LC_ALL="C")
    return env


@attrs.frozen
class CheckpointStore:
    """The shadow repositories under ``root`` (``<home>/checkpoints``)."""

    root: Path
    max_file_bytes: int = MAX_FILE_BYTES

    def shadow(self, tree: Path) -> Path:
        key = hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:16]
        return self.root / key

    def take(self, tree: Path, message: str) -> Snapshot:
        """Snapshot ``tree`` as a commit of its shadow repository."""
        git = _Git(self._ready(tree), tree)
        skipped = self._oversized(git, tree)
        kept_out = (*skipped, *self._home_inside(tree))
        if kept_out:
            # A file that grew past the cap leaves the snapshot rather than keep an old copy.
            git.run("rm", "--cached", "-q", "--ignore-unmatch", "--pathspec-from-file=-",
                    "-r", "--pathspec-file-nul", stdin=_nul(f":(literal){p}" for p in kept_out))
        git.run("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul",
                stdin=_nul((".", *(f":(exclude,literal){p}" for p in kept_out))))
        git.run("commit", "-q", "--allow-empty", "--no-verify", "-m", message)
        commit = git.run("rev-parse", "HEAD").strip()
        files = git.run("ls-files", "-z").count("\0")
        if skipped:
            log.info("checkpoint_skipped_large_files", tree=str(tree), count=len(skipped),
                     cap_bytes=self.max_file_bytes, first=skipped[0])
        return Snapshot(commit=commit, files=files, skipped=skipped)

    def restore(self, tree: Path, commit: str) -> Restored:
        """Make ``tree`` what checkpoint ``commit`` holds, after saving what it holds now."""
        shadow = self.shadow(tree)
        if not (shadow / "HEAD").exists():
            raise CheckpointError(f"no checkpoints of {tree} under {self.root}")
        git = _Git(shadow, tree)
        if git.run("cat-file", "-t", commit, check=False).strip() != "commit":
            raise CheckpointError(f"checkpoint {commit} is not in {shadow}")
        saved = self.take(tree, f"before rollback to {commit}")
        changes = git.run("diff", "--name-status", "--no-renames", "-z", saved.commit, commit)
        statuses = changes.split("\0")[0::2]
        git.run("read-tree", "-u", "--reset", commit)
        return Restored(saved=saved.commit, removed=statuses.count("D"),
                        restored=sum(1 for s in statuses if s in ("A", "M", "T")))

    def _ready(self, tree: Path) -> Path:
        if not tree.is_dir():
            raise CheckpointError(f"the working tree {tree} is not a directory")
        shadow = self.shadow(tree)
        if (shadow / "HEAD").exists():
            return shadow
        shadow.parent.mkdir(parents=True, exist_ok=True)
        _git(["init", "-q", "--bare", str(shadow)], cwd=shadow.parent)
        _Git(shadow, tree).run("config", "core.bare", "false")
        (shadow / "info").mkdir(exist_ok=True)
        (shadow / "info" / "exclude").write_text("\n".join(DEFAULT_EXCLUDES) + "\n")
        # For a person looking at the home: which tree this repository snapshots.
        (shadow / "mibyan-tree").write_text(f"{tree.resolve()}\n")
        return shadow

    def _home_inside(self, tree: Path) -> tuple[str, ...]:
        """mibyan's home when it lies inside the tree: its logs (and the shadow repositories
        themselves) are never snapshotted, so a rollback never rewinds a session's log."""
        home = self.root.parent.resolve()
        try:
            inside = home.relative_to(tree.resolve())
        except ValueError:
            return ()
        return (inside.as_posix(),) if inside.parts else ()

    def _oversized(self, git: _Git, tree: Path) -> tuple[str, ...]:
        """Files new or changed since the last checkpoint that are over the cap."""
        listed = git.run("ls-files", "-z", "--others", "--modified", "--exclude-standard")
        big = []
        for name in filter(None, listed.split("\0")):
            try:
                size = (tree / name).lstat().st_size
            except OSError:
                continue  # deleted since the last checkpoint
            if size > self.max_file_bytes:
                big.append(name)
        return tuple(sorted(set(big)))


def _nul(items: Iterable[str]) -> str:
    return "".join(f"{item}\0" for item in items)


def _git(args: Sequence[str], *, cwd: Path, stdin: str | None = None,
         check: bool = True) -> str:
    """One git command; its failure a ``CheckpointError`` naming git's last word."""
    try:
        # Names that are not UTF-8 go through unchanged (surrogate escapes).
        done = subprocess.run(["git", *_CONFIG, *args], input=stdin, capture_output=True,
                              encoding="utf-8", errors="surrogateescape", cwd=cwd,
                              env=_environment(), timeout=GIT_TIMEOUT, check=False)
    except FileNotFoundError as exc:
        raise CheckpointError("git is not installed (checkpoints need the git binary)") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckpointError(f"git failed: {exc}") from exc
    if check and done.returncode != 0:
        verb = next(a for a in args if not a.startswith("-"))
        lines = done.stderr.strip().splitlines()
        raise CheckpointError(f"git {verb} failed: {lines[-1] if lines else done.returncode}")
    return done.stdout


@attrs.frozen
class _Git:
    """Commands of one shadow repository over one tree."""

    shadow: Path
    tree: Path

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return _git([f"--git-dir={self.shadow}", f"--work-tree={self.tree}", *args],
                    cwd=self.tree, stdin=stdin, check=check)


@attrs.frozen
class TreeCheckpoints:
    """The checkpoints of one agent's working tree: what the performers are given."""

    store: CheckpointStore
    tree: Path

    def take(self, turn: int) -> Snapshot:
        return self.store.take(self.tree, f"before turn {turn}")

    def restore(self, tree: Path, commit: str) -> Restored:
        return self.store.restore(tree, commit)
