"""The note a token-recording session gets when a provider of its chain cannot give what it
records (rules 9, ``token_notes``): Anthropic's Messages API returns no logprobs and no token
ids, so its replies carry none; the prompt's tokens are still recorded where a tokenizer is
named. Said once, at the session's first model call, as a turn warning, never an error."""

from __future__ import annotations

from stages.log.api_mode import ANTHROPIC_MESSAGES
from stages.log.events import ContextNotice, SessionSettings
from stages.log.state import State

__all__ = ["token_note"]


def token_note(state: State, config: SessionSettings) -> tuple[ContextNotice, ...]:
    """The note, when this is the session's first call and its chain has such a provider."""
    if not (config.rule_set.token_notes and config.record_tokens and state.api_calls == 0):
        return ()
    blind = [e.provider for e in config.chain if e.api_mode == ANTHROPIC_MESSAGES]
    if not blind:
        return ()
    prompt = (f"the prompt's tokens come from the tokenizer {config.tokenizer!r}"
              if config.tokenizer else
              "name a tokenizer ([tokens] tokenizer, --tokenizer) to record the prompt's tokens")
    return (ContextNotice(
        source="tokens", name=", ".join(dict.fromkeys(blind)),
        detail="the Anthropic Messages API returns no logprobs or token ids, so replies from "
               f"this provider record none and token-level export skips them; {prompt}"),)
