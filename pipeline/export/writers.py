"""Writing samples as they come: JSONL or Parquet, whole or not at all, and provenance where
it was asked for: inline (a ``provenance`` key in each sample), in a sidecar file next to the
samples (``<out>.provenance.jsonl``: one line per sample, in the same order), or nowhere.

OpenAI's fine-tuning takes lines with only the keys it documents, so an OpenAI export carries
no provenance unless it is asked for; the other formats carry it inline by default.

The samples are written one by one as an iterable gives them, so an export holds only the
samples in flight, not the whole dataset; the files appear (replacing any old ones) only when
the iterable is exhausted, and not at all when it raises.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from pipeline.export.names import PROVENANCE_NAMES
from pipeline.export.parquet_out import ParquetSink
from stages.errors import UsageError

__all__ = ["PROVENANCE_MODES", "default_provenance", "sidecar_path", "write_samples"]

PROVENANCE_MODES = PROVENANCE_NAMES


def default_provenance(fmt: str) -> str:
    return "none" if fmt == "openai" else "inline"


def sidecar_path(out: Path) -> Path:
    return out.with_name(out.name + ".provenance.jsonl")


def write_samples(rows: Iterable[dict[str, Any]], out: Path, *, output: str,
                  provenance: str) -> int:
    """Write ``rows`` (each with its ``provenance``) to ``out`` as ``output``, provenance
    as ``provenance`` says; the number of rows."""
    count = 0
    with contextlib.ExitStack() as stack:
        sink = _sink(output, stack.enter_context(_replacing(out)))
        stack.callback(sink.discard)
        side = None
        if provenance == "sidecar":
            side = _JsonlSink(stack.enter_context(_replacing(sidecar_path(out))))
            stack.callback(side.discard)
        for row in rows:
            if side is not None:
                side.add({"index": count, "provenance": row["provenance"]})
            sink.add(row if provenance == "inline" else
                     {k: v for k, v in row.items() if k != "provenance"})
            count += 1
        sink.close()
        if side is not None:
            side.close()
    return count


class _Sink(Protocol):
    def add(self, row: dict[str, Any]) -> None: ...
    def close(self) -> None: ...
    def discard(self) -> None: ...


class _JsonlSink:
    def __init__(self, path: Path) -> None:
        self._fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close/discard

    def add(self, row: dict[str, Any]) -> None:
        self._fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

    def close(self) -> None:
        self._fh.close()

    def discard(self) -> None:
        self._fh.close()


def _sink(output: str, path: Path) -> _Sink:
    return ParquetSink(path) if output == "parquet" else _JsonlSink(path)


@contextlib.contextmanager
def _replacing(out: Path) -> Iterator[Path]:
    """A temporary file beside ``out`` that replaces it when the block ends: a reader never
    sees half a file, and a failed write leaves no temporary file behind."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc}") from exc
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {out}: {exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
