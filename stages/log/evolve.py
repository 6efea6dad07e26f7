"""``evolve``: ``attrs.evolve`` for the fold's hot path.

``attrs.evolve`` looks up the class's fields and calls ``__init__`` with every one of them on
each call; the fold evolves the session state two or three times per event, which made it the
largest single cost of a replay. This version passes only the changed fields through their
converters, and copies the others: those of a class with a ``__dict__`` (the session's state,
evolved on every event) in one dict update, in C; those of a slotted class through the slots'
descriptors, in a function generated per set of changed fields. Classes with validators or a
post-init hook (whose checks could depend on other fields) keep ``attrs.evolve``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")

_new = object.__new__
_EVOLVERS: dict[tuple[Any, ...], Callable[..., Any]] = {}
# A plain class with a __dict__: its fields' names, and its converters by field name.
_DictPlan = tuple[frozenset[str], tuple[tuple[str, Callable[[Any], Any]], ...]]
_DICT_PLANS: dict[type, _DictPlan | None] = {}


def _plain(cls: type) -> bool:
    """No validators nor post-init hook (whose checks could depend on other fields), every
    field set by ``__init__`` under its own name."""
    return not hasattr(cls, "__attrs_post_init__") and all(
        f.validator is None and f.init and f.alias == f.name
        and not isinstance(f.converter, attrs.Converter) for f in attrs.fields(cls))


def _dict_plan(cls: type) -> _DictPlan | None:
    """The plan of a plain class whose fields all live in its ``__dict__`` (no class of its
    MRO has slots); None for any other."""
    if not _plain(cls) or any("__slots__" in c.__dict__ for c in cls.__mro__[:-1]):
        return None
    fields = attrs.fields(cls)
    return (frozenset(f.name for f in fields),
            tuple((f.name, f.converter) for f in fields if f.converter is not None))


def _slot(cls: type, name: str) -> Any:
    return next(c.__dict__[name] for c in cls.__mro__ if name in c.__dict__)


def _evolver(cls: type, changed: tuple[str, ...]) -> Callable[..., Any]:
    """For a plain slotted class, a function that copies the other slots through their
    descriptors and passes the changed fields through their converters; ``attrs.evolve``
    for any other class."""
    fields = attrs.fields(cls)
    if not _plain(cls) or not set(cls.__dict__.get("__slots__", ("__dict__",))) <= {
            f.name for f in fields} | {"__weakref__"}:
        return lambda inst, **changes: attrs.evolve(inst, **changes)
    unknown = set(changed) - {f.name for f in fields}
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    namespace: dict[str, Any] = {"_new": _new, "cls": cls}
    # The generated names end in "__", which no plain field's name can (its alias would differ).
    lines = [f"def evolve(inst__, /, *, {', '.join(changed)}):", "    new__ = _new(cls)"]
    for i, f in enumerate(fields):
        # The slot's own descriptor: a frozen class's __setattr__ refuses, this does not.
        namespace[f"_set{i}"] = _slot(cls, f.name).__set__
        value = f"inst__.{f.name}"
        if f.name in changed:
            value = f.name
            if f.converter is not None:
                namespace[f"_convert{i}"] = f.converter
                value = f"_convert{i}({value})"
        lines.append(f"    _set{i}(new__, {value})")
    lines.append("    return new__")
    exec("\n".join(lines), namespace)
    evolve: Callable[..., Any] = namespace["evolve"]
    return evolve


def evolve(inst: T, **changes: Any) -> T:
    """A copy of the frozen attrs instance ``inst`` with ``changes``, as ``attrs.evolve``."""
    cls = type(inst)
    try:
        plan = _DICT_PLANS[cls]
    except KeyError:
        plan = _DICT_PLANS[cls] = _dict_plan(cls)
    if plan is None:
        key = (cls, *changes)
        try:
            make = _EVOLVERS[key]
        except KeyError:
            make = _EVOLVERS[key] = _evolver(cls, tuple(changes))
        result: T = make(inst, **changes)
        return result
    names, converters = plan
    if not names.issuperset(changes):  # reads the keys in C, with no view made
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(changes.keys() - names)}")
    new = _new(cls)
    # A frozen class's __setattr__ refuses; its __dict__ does not.
    fields = new.__dict__
    fields.update(inst.__dict__, **changes)  # the changes last, in one call
    for name, convert in converters:
        if name in changes:
            fields[name] = convert(changes[name])
    evolved: T = new
    return evolved
