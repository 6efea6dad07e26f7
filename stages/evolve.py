"""``evolve``: ``attrs.evolve`` for the fold's hot path.

``attrs.evolve`` looks up the class's fields and calls ``__init__`` with every one of them on
each call; the fold evolves the session state two or three times per event, which made it the
largest single cost of a replay. This version is generated once per class: it copies the
slots and passes only the changed fields through their converters. Classes with validators
or a post-init hook (whose checks could depend on other fields) keep ``attrs.evolve``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


@functools.cache
def _evolver(cls: type) -> Callable[[Any, dict[str, Any]], Any]:
    fields = attrs.fields(cls)
    names = {f.name for f in fields}
    plain = (set(getattr(cls, "__slots__", ("__dict__",))) <= names | {"__weakref__"}
             and not hasattr(cls, "__attrs_post_init__")
             and all(f.validator is None and f.init and f.alias == f.name
                     and not isinstance(f.converter, attrs.Converter) for f in fields))
    if not plain:
        return lambda inst, changes: attrs.evolve(inst, **changes)
    namespace: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__,
                                 "cls": cls}
    lines = ["def evolve(inst, changes):", "    new = _new(cls)"]
    for f in fields:
        new = f"changes.pop({f.name!r})"
        if f.converter is not None:
            namespace[f"_convert_{f.name}"] = f.converter
            new = f"_convert_{f.name}({new})"
        lines.append(f"    _set(new, {f.name!r}, {new} if {f.name!r} in changes "
                     f"else inst.{f.name})")
    lines += ["    if changes:",
              "        raise TypeError(f'{cls.__name__} has no field(s) {sorted(changes)}')",
              "    return new"]
    exec("\n".join(lines), namespace)
    evolve: Callable[[Any, dict[str, Any]], Any] = namespace["evolve"]
    return evolve


def evolve(inst: T, **changes: Any) -> T:
    """A copy of the frozen attrs instance ``inst`` with ``changes``, as ``attrs.evolve``."""
    cls: type = type(inst)
    result: T = _evolver(cls)(inst, changes)
    return result
