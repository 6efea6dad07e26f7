"""Tool-call repair: calls the model got slightly wrong, fixed where the intent is clear.

* a name in another case or style (``ReadFile``, ``read-file``, ``read_file_tool``), or a near
  miss of one tool (``read_fiel``; difflib ratio at least 0.7, clearly ahead of the next);
* arguments wrapped in a JSON string (``"{\\"path\\": \\"a\\"}"``);
* trailing commas before ``}`` or ``]``.

``repair(call, names)`` returns the fixed call and what was fixed, or None when nothing needs
or admits a fix. A call that is already valid is never changed (a property test holds that).
"""

from __future__ import annotations

import difflib
import json
import re

import attrs

from stages.log.messages import ToolCall

__all__ = ["CLEAR_MARGIN", "NEAR_MISS_CUTOFF", "Repair", "repair", "repair_arguments",
           "repair_name"]

NEAR_MISS_CUTOFF = 0.7
# A near miss must beat the second-best tool by this much, or the intent is not clear.
CLEAR_MARGIN = 0.05
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CUT_AT = re.compile(r"""["'<>]""")
_SUFFIX = re.compile(r"[_-]?tool$")
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


@attrs.frozen(kw_only=True)
class Repair:
    call: ToolCall
    repairs: tuple[str, ...]


def _variants(name: str) -> list[str]:
    """The name in the shapes models get wrong, most literal first."""
    cut = _CUT_AT.split(name, maxsplit=1)[0].strip()
    snake = _CAMEL.sub("_", cut).lower().replace("-", "_").replace(" ", "_")
    found = [cut.lower(), snake]
    for _ in range(2):
        snake = _SUFFIX.sub("", snake)
        found.append(snake)
    return [v for v in dict.fromkeys(found) if v]


def repair_name(name: str, names: tuple[str, ...]) -> str | None:
    """The one tool ``name`` clearly means, or None."""
    if name in names:
        return name
    lowered = {n.lower(): n for n in names}
    for variant in _variants(name):
        if variant in lowered:
            return lowered[variant]
    return _nearest(_variants(name)[-1] if _variants(name) else name, lowered)


def _nearest(name: str, lowered: dict[str, str]) -> str | None:
    """The closest tool, when it is close enough and clearly closer than the next one."""
    scored = sorted(((difflib.SequenceMatcher(None, name, n).ratio(), n) for n in lowered),
                    reverse=True)
    if not scored or scored[0][0] < NEAR_MISS_CUTOFF:
        return None
    if len(scored) > 1 and scored[0][0] - scored[1][0] < CLEAR_MARGIN:
        return None
    return lowered[scored[0][1]]


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text or "{}"), dict)
    except (ValueError, RecursionError):
        return False


def repair_arguments(text: str) -> tuple[str, str] | None:
    """``(fixed arguments, what was fixed)``, or None when they are fine or beyond repair."""
    if _is_object(text):
        return None
    try:
        inner = json.loads(text)
    except (ValueError, RecursionError):
        inner = None
    if isinstance(inner, str) and _is_object(inner):
        return inner, "arguments_unwrapped"
    cleaned = _TRAILING_COMMA.sub(r"\1", text)
    if cleaned != text and _is_object(cleaned):
        return cleaned, "trailing_commas"
    return None


def repair(call: ToolCall, names: tuple[str, ...]) -> Repair | None:
    """The call with its name and arguments fixed where that is clear; None if nothing was."""
    repairs: list[str] = []
    name = repair_name(call.name, names)
    if name is not None and name != call.name:
        repairs.append("name")
    arguments = call.arguments
    fixed = repair_arguments(arguments)
    if fixed is not None:
        arguments, what = fixed
        repairs.append(what)
    if not repairs:
        return None
    return Repair(call=attrs.evolve(call, name=name or call.name, arguments=arguments),
                  repairs=tuple(repairs))
