"""The built-in memory: ``MEMORY.md`` (the agent's notes) and ``USER.md`` (who the user is)
under ``<home>/memories``, entries separated by a line holding ``§``.

Writes are whole-file atomic replacements under a lock file, so two processes never interleave
and a crash leaves the old file or the new one. Each store has a character limit (the entries
joined); an add that would pass it is refused with the current entries, so the model can make
room. Every write is scanned for prompt injection (strict scope) first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs

from stages.prompt.injection_wide import scan_wide as scan
from stages.prompt.memory import ENTRY_SEPARATOR, SEPARATOR_LINE, TARGETS, entries

FILES = {"memory": "MEMORY.md", "user": "USER.md"}


class MemoryWriteRefused(ValueError):
    """A write the store does not make; the message says why, for the model to read."""


@attrs.define
class MemoryStore:
    home: Path
    limits: dict[str, int] = attrs.field(
        factory=lambda: {target: limit for target, (_, limit) in TARGETS.items()})

    @property
    def directory(self) -> Path:
        return self.home / "memories"

    def path(self, target: str) -> Path:
        if target not in FILES:
            raise MemoryWriteRefused(f"unknown memory target {target!r}; use 'memory' or 'user'")
        return self.directory / FILES[target]

    def entries(self, target: str) -> list[str]:
        try:
            return entries(self.path(target).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []

    def snapshot(self) -> tuple[tuple[str, str], ...]:
        """(target, text) of the stores that hold anything, as the prompt's snapshot."""
        out = []
        for target in FILES:
            items = self.entries(target)
            if items:
                out.append((target, ENTRY_SEPARATOR.join(items)))
        return tuple(out)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, target: str, items: list[str]) -> None:
        path = self.path(target)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(ENTRY_SEPARATOR.join(items) + ("\n" if items else ""))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _check(self, target: str, items: list[str], content: str) -> None:
        if SEPARATOR_LINE.search(content):
            raise MemoryWriteRefused("refused: a line holding only '§' separates entries")
        findings = scan(content, "strict")
        if findings:
            raise MemoryWriteRefused("refused: the entry looks like a prompt injection or an "
                                     f"exfiltration attempt ({', '.join(findings)})")
        used = len(ENTRY_SEPARATOR.join(items))
        if used > self.limits[target]:
            raise MemoryWriteRefused(
                f"refused: {target} would hold {used} chars, over its limit of "
                f"{self.limits[target]}; replace or remove entries first. Current entries: "
                + " | ".join(self.entries(target)))

    def add(self, target: str, content: str) -> list[str]:
        content = content.strip()
        if not content:
            raise MemoryWriteRefused("refused: the entry is empty")
        with self._locked():
            items = self.entries(target)
            if content in items:
                raise MemoryWriteRefused("refused: that exact entry is already saved")
            self._check(target, [*items, content], content)
            self._write(target, [*items, content])
            return [*items, content]

    def _match(self, items: list[str], old: str) -> int:
        hits = [i for i, item in enumerate(items) if old and old in item]
        if len(hits) != 1:
            raise MemoryWriteRefused(
                f"refused: {len(hits)} entries contain {old!r}; give text that matches exactly "
                "one entry")
        return hits[0]

    def replace(self, target: str, old: str, content: str) -> list[str]:
        content = content.strip()
        with self._locked():
            items = self.entries(target)
            index = self._match(items, old)
            updated = [*items[:index], content, *items[index + 1:]] if content else \
                [*items[:index], *items[index + 1:]]
            self._check(target, updated, content)
            self._write(target, updated)
            return updated

    def remove(self, target: str, old: str) -> list[str]:
        with self._locked():
            items = self.entries(target)
            index = self._match(items, old)
            updated = [*items[:index], *items[index + 1:]]
            self._write(target, updated)
            return updated
