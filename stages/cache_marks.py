"""Cache marks: Anthropic ``cache_control`` breakpoints, at most four: the system prompt and
the last three messages. Only the Anthropic Messages API takes them, and only when the
session's caching policy is on."""

from __future__ import annotations

from stages.events import ProviderEntry, SessionSettings
from stages.state import State

MAX_BREAKPOINTS = 4


def cache_marks_for(state: State, entry: ProviderEntry, *,
                    config: SessionSettings) -> tuple[int, ...]:
    """Indices into the history that get a breakpoint; -1 stands for the system prompt."""
    if entry.api_mode != "anthropic_messages" or not config.prompt_caching:
        return ()
    system = (-1,) if state.system_prompt else ()
    last = MAX_BREAKPOINTS - len(system)
    count = len(state.messages)
    return system + tuple(range(max(0, count - last), count))
