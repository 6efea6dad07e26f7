"""The one converter that turns events into plain payloads and back (a tagged union by kind)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

from stages.errors import LogCorruptError
from stages.log.events import (
    EVENT_TYPES,
    ContextInherited,
    Event,
    ModelReplied,
    ProviderEntry,
    SessionSettings,
    SessionStarted,
    TurnStarted,
    Usage,
)
from stages.log.messages import Message
from stages.log.tool_specs import ToolOutcome
from stages.log.upcast import upcast

# Fields added after logs existed: left out of a payload while unset, so an event that does
# not use them is written exactly as before (readers of the log see no new keys).
ADDITIVE_FIELDS: dict[type, tuple[str, ...]] = {
    Message: ("reasoning_parts",),
    TurnStarted: ("reasoning_effort", "reasoning_budget"),
    ProviderEntry: ("reasoning_effort", "reasoning_budget"),
    SessionSettings: ("reasoning_effort", "reasoning_budget", "sandbox", "network",
                      "allow_unconfined", "record_tokens"),
    ContextInherited: ("reasoning_replay_off",),
    Usage: ("reasoning_in_output",),
    ToolOutcome: ("findings",),
    SessionStarted: ("data_boundary",),
    # After Usage: its hook is built with the hooks registered before it.
    ModelReplied: ("tokens",),
}


def _strict(kind: type, accepted: tuple[type, ...]) -> Callable[[object, type], object]:
    def structure(value: object, _: type) -> object:
        if type(value) is kind:  # nearly always: a value of the very type, kept as it is
            return value
        # bool is an int subclass; a log that says true where a count belongs is corrupt.
        if type(value) not in accepted:
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {value!r}")
        return kind(value)
    return structure


@functools.cache
def make_converter() -> cattrs.Converter:
    """Built once per process: cattrs generates and caches (un)structuring code per class.
    Scalars are checked, not coerced: a wrongly typed field means a corrupt log."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    for kind, accepted in ((str, (str,)), (int, (int,)), (float, (float, int)), (bool, (bool,))):
        converter.register_structure_hook(kind, _strict(kind, accepted))
    for cls, names in ADDITIVE_FIELDS.items():
        overrides: dict[str, Any] = {name: override(omit_if_default=True) for name in names}
        converter.register_unstructure_hook(cls, make_dict_unstructure_fn(
            cls, converter, **overrides))
    return converter


def warm() -> None:
    """Generate the (un)structuring code of every event kind now (a tenth of a second), as a
    process does before it forks workers that would each pay it again."""
    converter = make_converter()
    for cls in EVENT_TYPES.values():
        converter.get_structure_hook(cls)
        converter.get_unstructure_hook(cls)


def to_payload(event: Event) -> dict:
    return make_converter().unstructure(event)


def from_payload(kind: str, schema_version: int, payload: dict) -> Event:
    try:
        cls = EVENT_TYPES[kind]
        return make_converter().structure(upcast(kind, schema_version, payload), cls)
    except (KeyError, ValueError, TypeError, AttributeError, cattrs.BaseValidationError) as exc:
        raise LogCorruptError(f"cannot read a {kind!r} v{schema_version} event: {exc}") from exc
