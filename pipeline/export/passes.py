"""One pass of an export: the sessions shaped (here, on processes or on Ray) and their samples
written as each group comes back, with what the report tells counted on the way; the samples
are never all held at once.

The keys to redact are those the logs' credential labels name, and a log's labels are known
only once it is read: a pass that met a label naming a key it did not redact raises
:class:`MoreKeys` at its end, before its file replaced anything, and the export is done again
with every key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from pipeline.export.parallel import Shaped, Shaping, Task, shape_home
from pipeline.export.writers import write_samples
from pipeline.ray_cluster import OnRay

__all__ = ["MoreKeys", "Written", "named_keys", "write_pass"]


class MoreKeys(Exception):
    """The logs' labels named keys the pass did not redact: the file must not be kept."""

    def __init__(self, known: tuple[str, ...]) -> None:
        super().__init__("more keys to redact")
        self.known = known


@attrs.define(kw_only=True)
class Written:
    """What a pass wrote, told as the sessions come (the samples themselves are not kept)."""

    secrets: tuple[str, ...]
    env: Mapping[str, str]
    final: bool = False  # the keys are all known: no pass after this one
    labels: set[str] = attrs.Factory(set)
    read: list[str] = attrs.Factory(list)
    read_errors: list[tuple[str, str]] = attrs.Factory(list)
    blob_errors: list[tuple[str, str]] = attrs.Factory(list)
    redacted: int = 0
    samples: int = 0

    def rows(self, groups: Iterable[list[Shaped]], shaping: Shaping
             ) -> Iterator[dict[str, Any]]:
        for group in groups:
            for shaped in group:
                self.labels |= shaped.labels
                if shaped.read_error is not None:
                    self.read_errors.append((shaped.session_id, shaped.read_error))
                    continue
                self.read.append(shaped.session_id)
                self.redacted += shaped.redacted
                if shaped.blob_error is not None:
                    self.blob_errors.append((shaped.session_id, shaped.blob_error))
                yield from shaped.rows
        known = (*self.secrets, *named_keys(self.labels, self.env))
        if not self.final and known != shaping.known:
            raise MoreKeys(known)


def write_pass(task: Task, written: Written, root: Path, out: Path, session_ids: tuple[str, ...],
           shaping: Shaping, *, jobs: int | None, ray: OnRay | None, output: str,
           provenance: str) -> None:
    """One pass: every session shaped and its samples written as its group comes back."""
    groups = shape_home(task, root, session_ids, shaping, jobs=jobs, ray=ray)
    written.samples = write_samples(written.rows(groups, shaping), out, output=output,
                                    provenance=provenance)


def named_keys(labels: set[str], env: Mapping[str, str]) -> list[str]:
    """The keys the logs' credential labels name (the labels are environment variables), and
    those of the providers every session may have used."""
    labels = labels | {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"}
    return [env[label] for label in sorted(labels) if env.get(label)]
