"""``evolve``: ``attrs.evolve`` for the fold's hot path.

``attrs.evolve`` looks up the class's fields and calls ``__init__`` with every one of them on
each call; the fold evolves the session state two or three times per event, which made it the
largest single cost of a replay. This version generates one function per class and set of
changed fields, which copies the other fields and passes only the changed ones through their
converters. A class with a ``__dict__`` (the session's state, evolved on every event) is copied
in one dict update, in C; a slotted class slot by slot, through the slots' descriptors. Classes
with validators or a post-init hook (whose checks could depend on other fields) keep
``attrs.evolve``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")

_EVOLVERS: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _layout(cls: type) -> str | None:
    """``"slots"`` or ``"dict"``: how a plain class keeps its fields; None for any other."""
    fields = attrs.fields(cls)
    if (hasattr(cls, "__attrs_post_init__")
            or not all(f.validator is None and f.init and f.alias == f.name
                       and not isinstance(f.converter, attrs.Converter) for f in fields)):
        return None
    if all("__slots__" not in c.__dict__ for c in cls.__mro__[:-1]):
        return "dict"
    slots = cls.__dict__.get("__slots__", ("__dict__",))
    return "slots" if set(slots) <= {f.name for f in fields} | {"__weakref__"} else None


def _slot(cls: type, name: str) -> Any:
    return next(c.__dict__[name] for c in cls.__mro__ if name in c.__dict__)


def _evolver(cls: type, changed: tuple[str, ...]) -> Callable[..., Any]:
    layout = _layout(cls)
    if layout is None:
        return lambda inst, **changes: attrs.evolve(inst, **changes)
    fields = attrs.fields(cls)
    unknown = set(changed) - {f.name for f in fields}
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    namespace: dict[str, Any] = {"_new": object.__new__, "cls": cls}
    # The generated names end in "__", which no plain field's name can (its alias would differ).
    lines = [f"def evolve(inst__, /, *, {', '.join(changed)}):", "    new__ = _new(cls)"]
    if layout == "dict":
        # A frozen class's __setattr__ refuses; its __dict__ does not.
        lines += ["    dict__ = new__.__dict__", "    dict__.update(inst__.__dict__)"]
    for i, f in enumerate(fields):
        if layout == "dict" and f.name not in changed:
            continue
        value = f"inst__.{f.name}"
        if f.name in changed:
            value = f.name
            if f.converter is not None:
                namespace[f"_convert{i}"] = f.converter
                value = f"_convert{i}({value})"
        if layout == "dict":
            lines.append(f"    dict__[{f.name!r}] = {value}")
        else:
            # The slot's own descriptor: a frozen class's __setattr__ refuses, this does not.
            namespace[f"_set{i}"] = _slot(cls, f.name).__set__
            lines.append(f"    _set{i}(new__, {value})")
    lines.append("    return new__")
    exec("\n".join(lines), namespace)
    evolve: Callable[..., Any] = namespace["evolve"]
    return evolve


def evolve(inst: T, **changes: Any) -> T:
    """A copy of the frozen attrs instance ``inst`` with ``changes``, as ``attrs.evolve``."""
    key = (type(inst), *changes)
    try:
        make = _EVOLVERS[key]
    except KeyError:
        make = _EVOLVERS[key] = _evolver(type(inst), tuple(changes))
    result: T = make(inst, **changes)
    return result
