"""The one converter that turns events into plain payloads and back (a tagged union by kind)."""

from __future__ import annotations

import functools

import cattrs

from stages.events import EVENT_TYPES, Event
from stages.errors import LogCorruptError
from stages.upcast import upcast


@functools.cache
def make_converter() -> cattrs.Converter:
    """Built once per process: cattrs generates and caches (un)structuring code per class."""
    return cattrs.Converter(forbid_extra_keys=True)


def to_payload(event: Event) -> dict:
    return make_converter().unstructure(event)


def from_payload(kind: str, schema_version: int, payload: dict) -> Event:
    try:
        cls = EVENT_TYPES[kind]
        return make_converter().structure(upcast(kind, schema_version, payload), cls)
    except (KeyError, ValueError, TypeError, AttributeError, cattrs.BaseValidationError) as exc:
        raise LogCorruptError(f"cannot read a {kind!r} v{schema_version} event: {exc}") from exc
