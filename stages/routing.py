"""Routing stage: send simple turns to a cheap model. No cheap model is configured in the
session settings, so every call goes to the primary model."""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.events import SessionSettings
from stages.state import State


def decide_routing(state: State, *, config: SessionSettings) -> Decision:
    del state, config
    return NOTHING
