"""The session's sandbox settings (``[sandbox]`` in config.toml, or arguments), checked in one
place:

.. code-block:: toml

    [sandbox]
    mode = "workspace-write"     # or "read-only", "full-access"
    network = false              # commands may reach the network
    allow_unconfined = false     # where no sandbox starts, run commands without asking
    env_exclude = ["*KEY*", "*SECRET*", "*TOKEN*"]   # variables commands do not get
    env_keep = []                # variables they get even so ("GH_TOKEN")
"""

from __future__ import annotations

from typing import Any

from pipeline.config import settings_table
from stages.log.events import SandboxProbed

# config.toml's key -> the recorded setting.
_KEYS = {"mode": "sandbox", "network": "network", "allow_unconfined": "allow_unconfined",
         "env_exclude": "env_exclude", "env_keep": "env_keep"}


def sandbox_values(section: Any, **given: Any) -> dict[str, Any]:
    """The settings given as arguments (``sandbox``, ``network``, ``allow_unconfined``,
    ``env_exclude``, ``env_keep``), else those of ``[sandbox]``; a bad value is a
    ``UsageError`` naming it."""
    return settings_table("sandbox", section, given, _KEYS)


_told: set[str] = set()


def unconfined_notice(event: object) -> str | None:
    """What the user is told, once per process, when a session's sandbox cannot start: the
    commands that are not plainly read-only ask first (or are denied with nobody to ask)."""
    if not isinstance(event, SandboxProbed) or event.confined or event.mode == "full-access" \
            or "told" in _told:
        return None
    _told.add("told")
    return (f"no sandbox can start here ({event.detail}); commands that are not plainly "
            "read-only ask for approval first (denied where nobody can answer)")
