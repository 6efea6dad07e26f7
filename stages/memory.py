"""Memory stage: fence the memory providers' prefetch results into a block for the prompt."""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.events import SessionSettings
from stages.state import State

MEMORY_FENCE_OPEN = "<memory-context>"
MEMORY_FENCE_CLOSE = "</memory-context>"


def memory_block(prefetched: tuple[str, ...]) -> str | None:
    """The fenced block for the system prompt, or None when no provider returned anything."""
    parts = [p.strip() for p in prefetched if p.strip()]
    if not parts:
        return None
    return "\n".join([MEMORY_FENCE_OPEN, *parts, MEMORY_FENCE_CLOSE])


def decide_memory(state: State, *, config: SessionSettings) -> Decision:
    """Ask the memory providers to prefetch for the turn. No provider can be configured yet
    (the memory issue brings them), so there is nothing to ask."""
    del state, config
    return NOTHING
