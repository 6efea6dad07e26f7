"""Ephemeral notes (rules 3): said to the model in the call that needs them, never stored in
the history, as notes after the request's system prompt: a context the compression could not
relieve, and the iteration budget's last call (its summary request)."""

from __future__ import annotations

from stages.log.context_tokens import context_tokens, window_of
from stages.log.events import SessionSettings
from stages.log.state import State

BUDGET_PROMPT = (
    "You have reached the maximum number of tool-calling iterations for this turn. "
    "Do not call any more tools. Summarise the work done so far, what remains to be done, "
    "and anything the user should know to continue."
)


def pressure_note(state: State, config: SessionSettings) -> str | None:
    if (not config.rule_set.context_management or state.context.pressure is None
            or state.turn is None):
        return None
    window = window_of(state, config)
    share = min(999, 100 * context_tokens(state) // max(1, window.tokens))
    return (f"[Note: the conversation fills about {share}% of the context window and could "
            "not be compacted further; keep replies and tool outputs short.]")


def system_prompt(state: State, config: SessionSettings) -> str | None:
    """The request's system prompt: the session's, with this call's notes."""
    if state.context.pressure is None and (state.turn is None or not state.turn.budget_exhausted):
        return state.system_prompt  # neither note applies (nearly every call)
    notes = [note for note in (pressure_note(state, config), budget_note(state, config)) if note]
    if not notes:
        return state.system_prompt
    return "\n\n".join(part for part in (state.system_prompt, *notes) if part)


def budget_note(state: State, config: SessionSettings) -> str | None:
    if not config.rule_set.budget_note or state.turn is None or not state.turn.budget_exhausted:
        return None
    return BUDGET_PROMPT
