"""The one converter that turns events into plain payloads and back (a tagged union by kind)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from stages.errors import LogCorruptError
from stages.log.content_parts import Content, ImagePart, TextPart
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
    TurnStarted: ("reasoning_effort", "reasoning_budget", "client_tools", "tool_results",
                  "images"),
    ProviderEntry: ("reasoning_effort", "reasoning_budget"),
    SessionSettings: ("reasoning_effort", "reasoning_budget", "sandbox", "network",
                      "allow_unconfined", "record_tokens", "env_exclude", "env_keep"),
    ContextInherited: ("reasoning_replay_off",),
    Usage: ("reasoning_in_output",),
    ToolOutcome: ("findings",),
    SessionStarted: ("data_boundary",),
    # After Usage: its hook is built with the hooks registered before it.
    ModelReplied: ("tokens",),
}


_PART_TAGS: dict[str, type] = {"text": TextPart, "image": ImagePart}


def _structure_content(value: object, _: object) -> Content:
    """A message's content: text or null as before images, else a list of tagged parts."""
    if value is None or type(value) is str:
        return value
    if not isinstance(value, list):
        raise TypeError(f"expected text or content parts, got {type(value).__name__}")
    converter = make_converter()
    parts: list[TextPart | ImagePart] = []
    for raw in value:
        if not isinstance(raw, dict) or raw.get("type") not in _PART_TAGS:
            raise TypeError(f"unknown content part {raw!r:.80}")
        parts.append(converter.structure(raw, _PART_TAGS[raw["type"]]))
    return tuple(parts)


def _structure_part(converter: cattrs.Converter, tag: str, cls: type) -> Callable:
    """A part is written with its ``type`` tag (as OpenAI's parts are), read back without."""
    fields: Callable[[dict, type], object] = make_dict_structure_fn(cls, converter)

    def structure(value: object, _: type) -> object:
        if not isinstance(value, dict) or value.get("type") != tag:
            raise TypeError(f"expected a {tag!r} part, got {value!r:.80}")
        return fields({k: v for k, v in value.items() if k != "type"}, cls)
    return structure


def _unstructure_part(tag: str) -> Callable[[object], dict]:
    def unstructure(part: object) -> dict:
        fields = attrs.asdict(cast(Any, part), recurse=False)
        return {"type": tag, **{k: v for k, v in fields.items() if v is not None}}
    return unstructure


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
    converter.register_structure_hook_func(lambda t: t == Content, _structure_content)
    for tag, cls in _PART_TAGS.items():
        converter.register_unstructure_hook(cls, _unstructure_part(tag))
        converter.register_structure_hook(cls, _structure_part(converter, tag, cls))
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
