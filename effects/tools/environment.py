"""The environment a tool's commands get: mibyan's own, less the variables whose names say
they hold a key.

A key exported in the user's shell (``OPENAI_API_KEY``, ``GITHUB_TOKEN``) is otherwise one
``env`` or one ``curl -d "$AWS_SECRET_ACCESS_KEY"`` away from a model that read a prompt
injection, and in every child of every command. Names, not values, decide, as in Codex's
``shell_environment_policy`` (whose default patterns these are): a pattern is a shell-style
glob matched without regard to case; ``keep`` names what passes even so.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping


def command_environment(exclude: Iterable[str], keep: Iterable[str] = (),
                        environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (mibyan's, by default) without the variables ``exclude`` matches, unless
    ``keep`` matches them too."""
    source = os.environ if environ is None else environ
    dropped = [pattern.upper() for pattern in exclude]
    kept = [pattern.upper() for pattern in keep]
    return {name: value for name, value in source.items()
            if not _matches(name, dropped) or _matches(name, kept)}


def _matches(name: str, patterns: list[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in patterns)
