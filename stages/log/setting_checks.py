"""The checks of the recorded settings' values: each rule once, as an attrs validator.

``SessionSettings`` and ``ProviderEntry`` declare their fields with these, so a value no stage
can follow is refused when the settings are built. The shell checks a caller's values before it
builds anything (``pipeline.settings.check_session_values``) by calling the same validators,
so each setting has one rule and one wording. They raise ``SettingError``: a ``UsageError``
naming the setting for the caller, a ``ValueError`` for code building the value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeGuard

import attrs

from stages.errors import SettingError
from stages.log.rules import rule_set

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def whole(minimum: int, *, optional: bool = False) -> Validator:
    """A whole number of at least ``minimum`` (or None, when ``optional``)."""
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if optional and value is None:
            return
        if not _whole(value) or value < minimum:  # type: ignore[operator]
            raise SettingError(f"{attribute.name} must be a whole number of at least "
                               f"{minimum}, got {value!r}")
    return check


def seconds_or_more(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A finite number of seconds, 0 or more."""
    if not _number(value) or value < 0:  # type: ignore[operator]
        raise SettingError(f"{attribute.name} must be a number of seconds, at least 0; "
                           f"got {value!r}")


def positive_seconds(name: str, value: object) -> float:
    """A finite number of seconds above 0 (a timeout, a deadline), as a float."""
    if not _number(value) or value <= 0:  # type: ignore[operator]
        raise SettingError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)  # type: ignore[arg-type]


# The total deadline of a model call when none is given, in read timeouts.
DEADLINE_FACTOR = 3.0


def default_deadline(timeout: float) -> float:
    """The total deadline of a call whose read timeout is ``timeout`` and whose deadline was
    not given: three read timeouts (the adapters, ``Agent``, config.toml and the CLI alike)."""
    return positive_seconds("timeout", timeout) * DEADLINE_FACTOR


def fraction(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A share of the window: above 0, at most 1."""
    if not _number(value) or not 0 < value <= 1:  # type: ignore[operator]
        raise SettingError(f"{attribute.name} must be a fraction in (0, 1], got {value!r}")


def _number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def flag(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """True or false (not a number or a text that reads like one)."""
    if not isinstance(value, bool):
        raise SettingError(f"{attribute.name} must be true or false, got {value!r}")


def name_or_none(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Nothing, or a name that is not blank (a tokenizer's)."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise SettingError(f"{attribute.name} must be a name, got {value!r}")


def as_names(value: object) -> object:
    """A list of names as the tuple a frozen setting holds; anything else as it was given, for
    :func:`name_patterns` to refuse in the caller's words (a string is not a list of its
    letters)."""
    return tuple(value) if _names(value) else value


def _names(value: object) -> TypeGuard[list[str] | tuple[str, ...]]:
    return isinstance(value, list | tuple) and all(
        isinstance(item, str) and item.strip() for item in value)


def name_patterns(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A list of names or shell-style patterns (``*KEY*``), none of them blank."""
    if not _names(value):
        raise SettingError(f"{attribute.name} must be a list of names or patterns such as "
                           f'"*TOKEN*", got {value!r}')


def one_of(choices: tuple[str, ...], *, named: bool = False) -> Validator:
    """One of ``choices`` (see :func:`choice`)."""
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        choice(attribute.name, value, choices, named=named)
    return check


def choice(name: str, value: object, choices: tuple[str, ...], *, named: bool = False) -> None:
    """``value`` is one of ``choices``; ``named`` for a closed set of names (a strategy, an
    API), which the message calls unknown. Also for a value checked before it is stored."""
    if value in choices:
        return
    if named:
        raise SettingError(f"unknown {name} {value!r}; expected one of {', '.join(choices)}")
    raise SettingError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def known_rules(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    """A rules version this code can follow (``stages.log.rules``)."""
    try:
        rule_set(value)
    except ValueError as unknown:
        raise SettingError(str(unknown)) from None
