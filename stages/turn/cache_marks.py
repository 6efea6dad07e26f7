"""Cache marks: Anthropic ``cache_control`` breakpoints, at most four: the system prompt and
the last three messages. Only the Anthropic Messages API takes them, and only when the
session's caching policy is on."""

from __future__ import annotations

from stages.log.events import SessionSettings
from stages.log.state import State

MAX_BREAKPOINTS = 4


def decide_cache_marks(state: State, *, config: SessionSettings) -> tuple[int, ...]:
    """Indices into the history that get a breakpoint; -1 stands for the system prompt. They
    are not an event of their own: the request stage sends them and its digest covers them."""
    if state.turn is None:
        raise ValueError("cache marks are placed inside a turn")
    entry = config.chain[state.turn.provider_index]
    if entry.api_mode != "anthropic_messages" or not config.prompt_caching:
        return ()
    system = (-1,) if state.system_prompt else ()
    last = MAX_BREAKPOINTS - len(system)
    count = len(state.messages)
    return system + tuple(range(max(0, count - last), count))
