"""The writing of an export: the sessions shaped (here, on processes or on Ray) and their
samples written as each group comes back, with what the report tells counted on the way; the
samples are never all held at once.

Every sample is redacted in full before it is handed to the writer: the keys to redact are
known before the first session is shaped (:func:`named_keys` of the selection's labels), so
no file, temporary or not, ever holds a sample that a later session's key would have masked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from pipeline.export.parallel import Shaped, Shaping, Task, shape_home
from pipeline.export.writers import write_samples
from pipeline.ray_cluster import OnRay

__all__ = ["Written", "named_keys", "write_shaped"]


@attrs.define(kw_only=True)
class Written:
    """What was written, told as the sessions come (the samples themselves are not kept)."""

    read: list[str] = attrs.Factory(list)
    read_errors: list[tuple[str, str]] = attrs.Factory(list)
    blob_errors: list[tuple[str, str]] = attrs.Factory(list)
    redacted: int = 0
    samples: int = 0

    def rows(self, groups: Iterable[list[Shaped]]) -> Iterator[dict[str, Any]]:
        for group in groups:
            for shaped in group:
                if shaped.read_error is not None:
                    self.read_errors.append((shaped.session_id, shaped.read_error))
                    continue
                self.read.append(shaped.session_id)
                self.redacted += shaped.redacted
                if shaped.blob_error is not None:
                    self.blob_errors.append((shaped.session_id, shaped.blob_error))
                yield from shaped.rows


def write_shaped(task: Task, root: Path, out: Path, session_ids: tuple[str, ...],
                 shaping: Shaping, *, jobs: int | None, ray: OnRay | None, output: str,
                 provenance: str) -> Written:
    """Every session shaped and its samples written as its group comes back."""
    written = Written()
    groups = shape_home(task, root, session_ids, shaping, jobs=jobs, ray=ray)
    written.samples = write_samples(written.rows(groups), out, output=output,
                                    provenance=provenance)
    return written


def named_keys(labels: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """The keys the logs' credential labels name (the labels are environment variables), and
    those of the providers every session may have used."""
    every = {*labels, "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"}
    return [env[label] for label in sorted(every) if env.get(label)]
