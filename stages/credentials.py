"""Credentials stage: pick a key from the provider's pool, skipping keys in cooldown. A session
with a single key (the only kind so far) has nothing to choose."""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.events import SessionSettings
from stages.state import State


def decide_credentials(state: State, *, config: SessionSettings) -> Decision:
    del state, config
    return NOTHING
