"""What the dangerous-command detectors find: a :class:`Danger`, named by a stable key.

The key is what an approval remembers ("for the session", "always", ``approvals.json``), so a
key, once shipped, keeps its meaning; new kinds of danger get new keys.
"""

from __future__ import annotations

import attrs

__all__ = ["Danger"]


@attrs.frozen(kw_only=True)
class Danger:
    key: str
    description: str
    hard: bool = False
