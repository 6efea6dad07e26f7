"""Prompt stage: the effective system prompt for the turn.

A caller's ``system_message`` wins; otherwise identity + memory block. The prompt is recorded
only when it changes, so a stable prompt costs nothing per turn and keeps provider caches warm.
"""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.events import SessionSettings, SystemPromptSet
from stages.memory import memory_block
from stages.state import State

DEFAULT_IDENTITY = (
    "You are mibyan, a capable assistant. Use the tools you are given when they help, "
    "and answer concisely."
)


def build_system_prompt(state: State, prefetched: tuple[str, ...], *,
                        config: SessionSettings) -> str:
    if state.turn is not None and state.turn.system_message is not None:
        return state.turn.system_message
    parts = [config.identity or DEFAULT_IDENTITY]
    block = memory_block(prefetched)
    if block is not None:
        parts.append(block)
    return "\n\n".join(parts)


def decide_prompt(state: State, *, config: SessionSettings) -> Decision:
    prefetched = state.turn.prefetched if state.turn is not None else ()
    text = build_system_prompt(state, prefetched, config=config)
    if text == state.system_prompt:
        return NOTHING
    return Decision(events=(SystemPromptSet(text=text),))
