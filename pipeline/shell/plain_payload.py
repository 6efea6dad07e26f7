"""An event's payload, checked to read back as the event, without the codec's round trip.

Before an event is logged its payload is read back and compared with it
(``pipeline.shell.journal.encode``): structuring it again cost about 5 us for a flat event and
16 us for a model reply, a tenth of a turn's own CPU. For an event made only of plain values
that check is decided here by looking at the values: every field holds a value of exactly the
type it declares (``str``, ``int``, ``float``, ``bool``, ``None`` where it is optional), a
nested event part (a message, a usage, a tool call) of such values, or a tuple of them. The
codec's structuring hands such values back as they are (its scalar hooks return a value of the
very type unchanged), so the event read back is equal to the event, and the payload written
is what the codec writes (the same keys, a tuple as a list). The class's validators are run
here, as the read-back runs them when it rebuilds the event (an event copied with
``stages.log.evolve`` never ran them). Anything else (an ``int`` where a ``float`` belongs, a
``bool`` for an ``int``, a ``str`` subclass, an image part, a typed output) gets ``None``:
the general path checks and words it as before.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, Union

import attrs

from effects.eventlog.codec import ADDITIVE_FIELDS
from stages.log.content_parts import Content, ImagePart, TextPart
from stages.log.events import Event

__all__ = ["plain_payload"]

_SCALARS = (str, int, float, bool)
# Written with a ``type`` tag by hooks of their own (``effects.eventlog.codec``).
_TAGGED = (TextPart, ImagePart)


class _NotPlain(Exception):
    """A value the plain path does not vouch for: the general path decides."""


# A field's plan: (name, encode, omitted default or _KEEP). ``encode`` gives the payload value
# of a field's value or raises _NotPlain.
_KEEP = object()
Encode = typing.Callable[[Any], Any]


def _scalar(kinds: frozenset[type]) -> Encode:
    def encode(value: Any) -> Any:
        if type(value) in kinds:
            return value
        raise _NotPlain
    return encode


def _none_only(value: Any) -> Any:
    """A field of a type the plain path does not write (an output spec, an image part): only
    its ``None`` is plain."""
    if value is None:
        return None
    raise _NotPlain


def _tuple_of(item: Encode) -> Encode:
    def encode(value: Any) -> Any:
        if type(value) is not tuple:
            raise _NotPlain
        return [item(v) for v in value]
    return encode


def _fixed_tuple(items: tuple[Encode, ...]) -> Encode:
    """``tuple[str, str]``: the codec writes it as a tuple (JSON's array)."""
    def encode(value: Any) -> Any:
        if type(value) is not tuple or len(value) != len(items):
            raise _NotPlain
        return tuple(item(v) for item, v in zip(items, value, strict=True))
    return encode


def _as_is(kind: Any) -> frozenset[type] | None:
    """The exact types of the values declared ``kind`` that are written as they are (None:
    such a value needs an encoder)."""
    if kind is Content:  # text or None is written as it is; parts are the codec's
        return frozenset((str, type(None)))
    if kind in _SCALARS:
        return frozenset((kind,))
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (Union, types.UnionType) and type(None) in args:
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) != 1:  # which member a value is read back as is the codec's to say
            return frozenset((type(None),))
        if rest[0] in _SCALARS:
            return frozenset((rest[0], type(None)))
    return None


def _encoder(kind: Any) -> Encode:
    """How a value declared ``kind`` is written, or ``_none_only``."""
    kinds = _as_is(kind)
    if kinds is not None:
        return _scalar(kinds)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (Union, types.UnionType) and type(None) in args:  # optional, own kind
        rest = tuple(a for a in args if a is not type(None))
        inner = _encoder(rest[0])
        return lambda value: None if value is None else inner(value)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _tuple_of(_encoder(args[0]))
    if origin is tuple and args and Ellipsis not in args:
        return _fixed_tuple(tuple(_encoder(a) for a in args))
    if isinstance(kind, type) and attrs.has(kind):
        plan = _plan(kind)
        if plan is not None:
            return functools.partial(_encode_plain, kind, plan)
    return _none_only


class _Plan(typing.NamedTuple):
    # (name, exact types) of the fields written as they are (see _as_is), checked inline:
    # most fields are.
    scalars: tuple[tuple[str, frozenset[type]], ...]
    # (name, encode, the default that is not written or _KEEP) of the others.
    others: tuple[tuple[str, Encode, Any], ...]
    validators: tuple[tuple[Any, Any], ...]  # (validator, field) as attrs calls them


@functools.cache
def _plan(cls: type) -> _Plan | None:
    """The fields of ``cls`` as the codec writes them, or None when the class is not one the
    plain path can vouch for (a converter, a post-init step, a renamed field)."""
    if cls in _TAGGED or hasattr(cls, "__attrs_post_init__") or cls in _PLANNING:
        return None  # (a class holding itself is left to the codec)
    try:
        hints = typing.get_type_hints(cls)
    except NameError:  # an annotation named only for type checkers: the codec's to judge
        return None
    _PLANNING.add(cls)
    try:
        return _fields_plan(cls, hints)
    finally:
        _PLANNING.discard(cls)


_PLANNING: set[type] = set()


def _fields_plan(cls: type, hints: dict[str, Any]) -> _Plan | None:
    additive = ADDITIVE_FIELDS.get(cls, ())
    scalars, others, validators = [], [], []
    for field in attrs.fields(cls):
        if not field.init:
            continue  # derived (a message's wire text): never written
        if field.converter is not None or field.alias != field.name:
            return None
        if field.validator is not None:
            validators.append((field.validator, field))
        kind = hints[field.name]
        if field.name in additive:
            factory = getattr(field.default, "factory", None)  # an attrs.Factory
            default = factory() if factory is not None else field.default
            others.append((field.name, _encoder(kind), default))
        elif (kinds := _as_is(kind)) is not None:
            scalars.append((field.name, kinds))
        else:
            others.append((field.name, _encoder(kind), _KEEP))
    return _Plan(tuple(scalars), tuple(others), tuple(validators))


def _encode_plain(cls: type, plan: _Plan, value: Any) -> dict:
    if type(value) is not cls:
        raise _NotPlain
    payload = {}
    for name, kinds in plan.scalars:
        field = payload[name] = getattr(value, name)
        if type(field) not in kinds:
            raise _NotPlain
    for name, encode, default in plan.others:
        field = getattr(value, name)
        if default is not _KEEP and field == default:
            continue  # an additive field left at its default is not written
        payload[name] = encode(field)
    for validator, field in plan.validators:
        try:
            validator(value, field, getattr(value, field.name))
        except Exception as exc:  # the read-back would refuse it: the general path says why
            raise _NotPlain from exc
    return payload


def plain_payload(event: Event) -> dict | None:
    """``to_payload(event)`` when the event holds only plain values (it then reads back as
    itself), else None."""
    cls: type = type(event)
    plan = _plan(cls)
    if plan is None:
        return None
    try:
        return _encode_plain(cls, plan, event)
    except _NotPlain:
        return None
