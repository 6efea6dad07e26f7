"""The dangerous-command check of rules 7: commands read with a real shell parser."""

from __future__ import annotations

from stages.tools.danger import Danger
from stages.tools.shell import kinds
from stages.tools.shell.read import dangers

__all__ = ["detect"]


def detect(command: str) -> Danger | None:
    """The danger of ``command``: the first hard one, else the first one to ask about, else
    None. It never raises: a command it cannot read is asked about (fail closed)."""
    try:
        found = dangers(command)
    except Exception:  # a gap in the reader must ask, never let the command through or crash
        return kinds.UNPARSED
    return next((d for d in found if d.hard), found[0] if found else None)
