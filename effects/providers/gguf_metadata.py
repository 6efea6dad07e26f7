"""The key-value metadata at the head of a GGUF file (llama.cpp's model format, version 2 and
3), read without its tensors: a named tokenizer needs the vocabulary, merges and chat template
only. ``gguf``'s own reader makes a numpy view of every part of every field, some 13 seconds
for a 49,152-token vocabulary on a shared core; this reads the same values in well under one.

The layout (little-endian): ``GGUF``, the version (u32), the tensor count and the key count
(u64 each), then each key as a string (u64 length, UTF-8 bytes), its type (u32) and its value;
an array is its items' type (u32), their count (u64) and the items.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["read_metadata"]

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def read_metadata(path: Path, wanted: Callable[[str], bool] | Container[str]) -> dict[str, Any]:
    """The values of the keys ``wanted`` accepts (a predicate, or a set of names); a
    ``ValueError`` for a file that is not GGUF (or one big-endian or cut short)."""
    keep = wanted if callable(wanted) else wanted.__contains__
    with path.open("rb") as file:
        if file.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version, = _unpack(file, "<I")
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version} is not read here (2 and 3 are)")
        _tensors, count = _unpack(file, "<QQ")
        values: dict[str, Any] = {}
        for _ in range(count):
            key = _string(file)
            kind, = _unpack(file, "<I")
            value = _value(file, kind)
            if keep(key):
                values[key] = value
        return values


def _unpack(file: BinaryIO, fmt: str) -> tuple[Any, ...]:
    size = struct.calcsize(fmt)
    data = file.read(size)
    if len(data) != size:
        raise ValueError("the GGUF file ends inside its metadata")
    return struct.unpack(fmt, data)


def _string(file: BinaryIO) -> str:
    length, = _unpack(file, "<Q")
    data = file.read(length)
    if len(data) != length:
        raise ValueError("the GGUF file ends inside its metadata")
    return data.decode("utf-8", "replace")


def _value(file: BinaryIO, kind: int) -> Any:
    if kind == _STRING:
        return _string(file)
    if kind == _ARRAY:
        item, count = _unpack(file, "<IQ")
        if item in _SCALARS:  # one read for the whole array
            return list(_unpack(file, f"<{count}{_SCALARS[item][1]}"))
        return [_value(file, item) for _ in range(count)]
    if kind not in _SCALARS:
        raise ValueError(f"unknown GGUF value type {kind}")
    return _unpack(file, _SCALARS[kind])[0]
