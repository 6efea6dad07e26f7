"""Samples to Parquet with bounded memory: pyarrow's ``ParquetWriter``, one row group per
batch of samples, never one table of them all.

A Parquet file has one schema, written before the first row group, and the samples' shape
varies from row to row (a field null in some rows, ``images`` only where there are images).
So the rows are spooled to a JSON-lines file beside the output first, batch by batch, each
batch's schema unified into the file's (as ``Table.from_pylist`` infers it over every row);
then the spool is read back a batch at a time into that schema. The batches are cut by the
rows alone, so the file is the same whatever produced the rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stages.errors import UsageError

__all__ = ["ParquetSink", "parquet_row"]

# A batch (one row group) ends after this many rows or this much JSON text, whichever first.
BATCH_ROWS = 1000
BATCH_BYTES = 16_000_000


def _arrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise UsageError("Parquet output needs pyarrow: install mibyan[export]") from exc
    return pa, pq


def parquet_row(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with what varies in shape from row to row as JSON text, as chat datasets on the
    Hub store it: the tool schemas (``tools``) and TRL's tool-call ``arguments``. Inferred as
    structs, each row's keys padded every other row with nulls (a reader got back arguments
    they never had), and an argument that was an object in one row and not in another made
    the file impossible to write."""
    out = dict(row)
    if "tools" in out:
        out["tools"] = json.dumps(out["tools"], ensure_ascii=False, sort_keys=True)
    if "messages" in out:
        out["messages"] = [_stable_message(m) for m in out["messages"]]
    return out


def _stable_message(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls:
        return message
    return {**message, "tool_calls": [
        {**call, "function": {**call["function"], "arguments": _json_text(
            call["function"]["arguments"])}} for call in calls]}


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           sort_keys=True)


class ParquetSink:
    """Samples added one by one (JSON-able dicts), written to ``path`` as Parquet by
    :meth:`close`, each as :func:`parquet_row` makes it; the spool is removed either way."""

    def __init__(self, path: Path) -> None:
        self._pa, self._pq = _arrow()
        self._path = path
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".spool")
        self._spool_path = Path(name)
        self._spool = os.fdopen(fd, "w", encoding="utf-8")
        self._batch: list[dict[str, Any]] = []
        self._batch_bytes = 0
        self._schema = self._pa.schema([])

    def add(self, sample: dict[str, Any]) -> None:
        row = parquet_row(sample)
        line = json.dumps(row, ensure_ascii=False) + "\n"
        self._spool.write(line)
        self._batch.append(row)
        self._batch_bytes += len(line)
        if len(self._batch) >= BATCH_ROWS or self._batch_bytes >= BATCH_BYTES:
            self._end_batch()

    def close(self) -> None:
        try:
            self._end_batch()
            self._spool.close()
            self._write()
        finally:
            self.discard()

    def discard(self) -> None:
        self._spool.close()
        self._spool_path.unlink(missing_ok=True)

    def _end_batch(self) -> None:
        """The schema of the rows so far: this batch's unified into it (the batch is then
        dropped; its rows are in the spool)."""
        if not self._batch:
            return
        pa = self._pa
        with self._arrow_errors():
            found = pa.Table.from_pylist(self._batch).schema
            self._schema = pa.unify_schemas([self._schema, found],
                                            promote_options="permissive")
        self._batch, self._batch_bytes = [], 0

    def _write(self) -> None:
        with self._arrow_errors(), open(self._spool_path, encoding="utf-8") as spool, \
                self._pq.ParquetWriter(self._path, self._schema) as writer:
            batch: list[dict[str, Any]] = []
            size = 0
            for line in spool:
                batch.append(json.loads(line))
                size += len(line)
                if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
                    writer.write_table(self._table(batch))
                    batch, size = [], 0
            if batch:
                writer.write_table(self._table(batch))

    def _table(self, rows: list[dict[str, Any]]) -> Any:
        return self._pa.Table.from_pylist(rows, schema=self._schema)

    @contextlib.contextmanager
    def _arrow_errors(self) -> Iterator[None]:
        """Arrow's complaints about the samples' shape as a :class:`UsageError`."""
        try:
            yield
        except (self._pa.ArrowInvalid, self._pa.ArrowTypeError) as exc:
            raise UsageError(f"cannot write these samples as Parquet: {exc}") from exc
