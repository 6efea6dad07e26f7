"""Dangerous shell commands: the pure detectors the tool plan asks before a command runs.

``detect(command)`` returns a :class:`Danger` or None. A ``hard`` danger (rm of ``/`` or of a
system directory, mkfs, raw disk or kernel writes, fork bombs, killing every process,
shutdown) is blocked whatever the settings or approvals; the others need an approval. ``key``
names the kind, so that an approval "for the session" or "always" covers every command of that
kind. Sessions under rules 7 read commands with a shell parser (``stages.tools.shell``); older
ones keep the regular expressions they ran with (``stages.tools.dangerous_patterns``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from stages.log.rules import RuleSet
from stages.tools import dangerous_patterns, shell
from stages.tools.danger import Danger

__all__ = ["COMMAND_ARGUMENTS", "Danger", "Detect", "detect", "detector"]

COMMAND_ARGUMENTS = {"terminal": "command"}
"""The tools whose argument holds a shell command, and which argument it is."""

detect = shell.detect

Detect = Callable[[str, Collection[str]], "Danger | None"]
"""A detector: the command, the keys the session approved already; the danger to act on."""


def _table(command: str, approved: Collection[str] = ()) -> Danger | None:
    return dangerous_patterns.detect(command)  # the first match, approved or not (rules 3-6)


def detector(rules: RuleSet) -> Detect:
    """The detector a session of ``rules`` decides with."""
    return shell.detect if rules.shell_parser_check else _table
