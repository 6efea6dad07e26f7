"""The dangerous-command check of rules 7: commands read with a real shell parser."""

from __future__ import annotations

from collections.abc import Collection

from stages.tools.danger import Danger
from stages.tools.shell import kinds
from stages.tools.shell.read import dangers

__all__ = ["detect"]


def detect(command: str, approved: Collection[str] = ()) -> Danger | None:
    """The danger of ``command``: the first hard one, else the first to ask about whose key is
    not ``approved`` yet (so an approval of one kind for the session does not let another
    kind in the same command through unasked), else the first, else None. It never raises: a
    command it cannot read is asked about (fail closed)."""
    try:
        found = dangers(command)
    except Exception:  # a gap in the reader must ask, never let the command through or crash
        return kinds.UNPARSED
    hard = next((d for d in found if d.hard), None)
    if hard is not None or not found:
        return hard
    return next((d for d in found if d.key not in approved), found[0])
