"""What an ``Agent`` needs beyond the session's own settings (``stages.events.SessionSettings``,
recorded in the log): where its state lives, how hard it syncs, how long a model call may take,
how deep delegation goes. Plain frozen values, checked when they are built, so that a bad value
is a clear ``UsageError`` naming the setting before anything is logged."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

import attrs

from effects.eventlog import Durability
from stages.budget import DELEGATION_MAX_ITERATIONS
from stages.credential_pool import STRATEGIES
from stages.errors import UsageError
from stages.events import SessionSettings

__all__ = ["DEFAULT_DEADLINE", "DEFAULT_TIMEOUT", "AgentSettings", "check_session_values",
           "checked", "positive_number"]

# Seconds without a byte before a model call fails (read timeout), and seconds a whole call may
# take, keep-alive bytes or not (the reference system's request timeout).
DEFAULT_TIMEOUT = 600.0
DEFAULT_DEADLINE = 1800.0
_DURABILITIES = get_args(Durability)
_CACHE_TTLS = ("5m", "1h")


def positive_number(name: str, value: Any) -> float:
    """``value`` as seconds, or a ``UsageError`` naming the setting."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise UsageError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _positive_int(name: str, value: Any, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a whole number of at least 1, got {value!r}")


def _seconds(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    del instance
    if value is not None or attribute.name != "deadline":
        positive_number(attribute.name, value)


def _durability(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    del instance, attribute
    if value not in _DURABILITIES:
        raise UsageError(f"durability must be one of {', '.join(_DURABILITIES)}, got {value!r}")


def _delegation(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    del instance
    _positive_int(attribute.name, value)


@attrs.frozen(kw_only=True)
class AgentSettings:
    """The agent's settings that are not the session's: they may differ between two processes
    running the same session, so they are not logged."""

    home: Path = attrs.field(converter=lambda p: Path(p).expanduser())
    durability: Durability = attrs.field(default="durable", validator=_durability)
    # Read timeout of a model call, and its total deadline (None: no deadline).
    timeout: float = attrs.field(default=DEFAULT_TIMEOUT, validator=_seconds)
    deadline: float | None = attrs.field(default=DEFAULT_DEADLINE, validator=_seconds)
    delegation_max_iterations: int = attrs.field(default=DELEGATION_MAX_ITERATIONS,
                                                 validator=_delegation)
    # The session to continue (None: a new one), and the session that delegated to this one.
    session_id: str | None = None
    parent_session_id: str | None = None


def check_session_values(values: Mapping[str, Any]) -> None:
    """A ``UsageError`` naming the first bad value meant for ``SessionSettings``: checked at the
    edge, before the settings are built, so that a session that could never be resumed is
    never started."""
    _positive_int("max_turns", values.get("max_turns", 1))
    _positive_int("max_tokens", values.get("max_tokens"), optional=True)
    _positive_int("context_length", values.get("context_length"), optional=True)
    strategy = values.get("credential_strategy", STRATEGIES[0])
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown credential_strategy {strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)}")
    retries = values.get("max_retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UsageError(f"max_retries must be a whole number of at least 0, got {retries!r}")
    for name in ("retry_base_delay", "rate_limit_cooldown", "billing_cooldown"):
        if name in values:
            positive_number(name, values[name])
    if values.get("cache_ttl", _CACHE_TTLS[0]) not in _CACHE_TTLS:
        raise UsageError(f"cache_ttl must be one of {', '.join(_CACHE_TTLS)}, "
                         f"got {values['cache_ttl']!r}")


def checked(settings: SessionSettings) -> SessionSettings:
    """``settings`` after :func:`check_session_values` found nothing wrong in them."""
    check_session_values(attrs.asdict(settings, recurse=False))
    return settings
