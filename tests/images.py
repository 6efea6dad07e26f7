"""Small real images for tests: valid PNG files of a given size, built with zlib."""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png(width: int = 2, height: int = 2, shade: int = 0) -> bytes:
    """A grey PNG of ``width`` x ``height`` pixels (``shade`` makes distinct images)."""
    row = b"\x00" + bytes([shade % 256]) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(row * height)) + _chunk(b"IEND", b""))
