"""Pure upcasters: old event payloads to the current schema, so old logs keep replaying.

``UPCASTERS[(kind, version)]`` turns a payload of ``version`` into one of ``version + 1``.
Every event kind is at version 1 so far; a bump adds its function here and a log to the frozen
corpus in ``tests/corpus``.
"""

from __future__ import annotations

from collections.abc import Callable

from stages.events import EVENT_TYPES

Upcaster = Callable[[dict], dict]

UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def upcast(kind: str, version: int, payload: dict) -> dict:
    """``payload`` raised from ``version`` to the current version of ``kind``."""
    current = EVENT_TYPES[kind].schema_version
    if version > current:
        raise ValueError(f"{kind} v{version} is newer than this mibyan understands (v{current})")
    while version < current:
        payload = UPCASTERS[(kind, version)](payload)
        version += 1
    return payload
