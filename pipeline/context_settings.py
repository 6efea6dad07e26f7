"""The session's context settings (``[context]`` in config.toml, or arguments), checked in
one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from stages.errors import UsageError
from stages.log.events import SessionSettings

_FRACTIONS = ("preflight_threshold", "between_turns_threshold")
_FIELDS = attrs.fields_dict(SessionSettings)


def context_values(section: Mapping[str, Any], **given: Any) -> dict[str, Any]:
    """The session's context settings: the arguments, else config.toml's ``[context]``
    (``compression``, ``preflight_threshold``, ``between_turns_threshold``,
    ``protect_last_n``, ``summary_model``, ``context_engine``); checked here, so that a bad
    value is a ``UsageError`` naming it."""
    if not isinstance(section, Mapping):
        raise UsageError(f"[context] in config.toml must be a table, got {section!r}")
    values = {name: value if value is not None else section.get(name)
              for name, value in given.items()}
    out: dict[str, Any] = {}
    for name in _FRACTIONS:
        value = values[name]
        if value is not None:
            # The field's own rule (``stages.log.setting_checks.fraction``); then a float, so
            # that the log records ``1.0`` for ``1`` as it always has.
            validator = _FIELDS[name].validator
            assert validator is not None
            validator(None, _FIELDS[name], value)
            out[name] = float(value)
    if values["compression"] is not None:
        if not isinstance(values["compression"], bool):
            raise UsageError(f"compression must be true or false, got {values['compression']!r}")
        out["compression_enabled"] = values["compression"]
    protect = values["protect_last_n"]
    if protect is not None:
        if isinstance(protect, bool) or not isinstance(protect, int) or protect < 1:
            raise UsageError(f"protect_last_n must be a whole number of at least 1, "
                             f"got {protect!r}")
        out["protect_last_n"] = protect
    for name in ("summary_model", "context_engine"):
        if values[name] is not None:
            if not isinstance(values[name], str) or not values[name]:
                raise UsageError(f"{name} must be a name, got {values[name]!r}")
            out[name] = values[name]
    return out
