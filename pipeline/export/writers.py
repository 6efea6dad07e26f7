"""Writing samples: JSONL or Parquet, whole or not at all, and provenance where it was asked
for: inline (a ``provenance`` key in each sample), in a sidecar file next to the samples
(``<out>.provenance.jsonl``: one line per sample, in the same order), or nowhere.

OpenAI's fine-tuning takes lines with only the keys it documents, so an OpenAI export carries
no provenance unless it is asked for; the other formats carry it inline by default.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.export.names import PROVENANCE_NAMES
from stages.errors import UsageError

__all__ = ["PROVENANCE_MODES", "default_provenance", "sidecar_path", "write_samples"]

PROVENANCE_MODES = PROVENANCE_NAMES


def default_provenance(fmt: str) -> str:
    return "none" if fmt == "openai" else "inline"


def sidecar_path(out: Path) -> Path:
    return out.with_name(out.name + ".provenance.jsonl")


def write_samples(rows: list[dict[str, Any]], out: Path, *, output: str,
                  provenance: str) -> None:
    """Write ``rows`` (each with its ``provenance``) to ``out`` as ``output``, provenance
    as ``provenance`` says."""
    kept = rows if provenance == "inline" else [
        {k: v for k, v in row.items() if k != "provenance"} for row in rows]
    if output == "parquet":
        _write_parquet([parquet_row(row) for row in kept], out)
    else:
        _write_jsonl(kept, out)
    if provenance == "sidecar":
        _write_jsonl([{"index": i, "provenance": row["provenance"]}
                      for i, row in enumerate(rows)], sidecar_path(out))


def _write_jsonl(rows: list[dict[str, Any]], out: Path) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    _replace(out, write)


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


def _write_parquet(rows: list[dict[str, Any]], out: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise UsageError("Parquet output needs pyarrow: install mibyan[export]") from exc

    def write(tmp: Path) -> None:
        try:
            pq.write_table(pa.Table.from_pylist(rows), tmp)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise UsageError(f"cannot write these samples as Parquet: {exc}") from exc
    _replace(out, write)


def _replace(out: Path, write: Callable[[Path], None]) -> None:
    """``out`` written whole or not at all: a reader never sees half a file, and a failed
    write leaves no temporary file behind."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc}") from exc
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {out}: {exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
