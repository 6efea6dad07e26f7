"""``ContextEngine``: what decides when and how a session's context is compacted, and the
default one, the compressor. An engine is pure (a plan from the state, a request for the
summary, the new history from the plan); the turn machine asks the shell for the summary.
Engines are chosen by name (``SessionSettings.context_engine``); a plugin registers its own
with :func:`register_context_engine` before a session uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from stages.context import summary as sm
from stages.context.apply import compacted
from stages.context.compression_plan import (
    Budgets,
    boundaries,
    cut_indices,
    middle_chars,
    middle_tokens,
    pruned_indices,
)
from stages.decision import ModelRequest
from stages.log.context_tokens import CHARS_PER_TOKEN, window_of
from stages.log.context_window import resolve_window
from stages.log.events import CompressionPlanned, SessionSettings
from stages.log.messages import Message
from stages.log.state import State

SUMMARY_FAILURE_COOLDOWN = 600.0
MIN_MIDDLE_TOKENS = 64
# A summary message of the shortest useful summary, its frame included (rules 9
# ``summary_must_shrink``): a middle no larger than this is not summarised.
SMALLEST_SUMMARY_CHARS = len(sm.summary_text("")) + MIN_MIDDLE_TOKENS * CHARS_PER_TOKEN


class ContextEngine(Protocol):
    def plan(self, state: State, config: SessionSettings, *, reason: str, window: int,
             estimate: int, now: float) -> CompressionPlanned | None:
        """What to keep, prune and summarise; None when nothing can be gained."""
        ...

    def summary_request(self, state: State, config: SessionSettings,
                        plan: CompressionPlanned) -> ModelRequest:
        """The auxiliary call that writes (or updates) the summary of the plan's middle."""
        ...

    def summary(self, previous: str | None, written: str) -> str:
        """The summary kept from the one written (an update keeps what must stay)."""
        ...

    def compacted(self, messages: Sequence[Message], plan: CompressionPlanned,
                  middle_text: str | None) -> tuple[Message, ...]:
        """The history after ``plan``, with ``middle_text`` in place of its middle."""
        ...


class Compressor:
    """The default engine: head and tail protected, old tool results pruned, the middle
    summarised by an auxiliary model call (iteratively updated)."""

    def plan(self, state: State, config: SessionSettings, *, reason: str, window: int,
             estimate: int, now: float) -> CompressionPlanned | None:
        messages = state.messages
        iterative = config.rule_set.iterative_compression
        b = boundaries(messages, window=window, protect_last_n=config.protect_last_n,
                       keep_user=iterative)
        budgets = Budgets(window=window)
        middle = middle_tokens(messages, b)
        if middle < MIN_MIDDLE_TOKENS or (
                config.rule_set.summary_must_shrink
                and middle_chars(messages, b) <= SMALLEST_SUMMARY_CHARS):
            # Too little to summarise: a summary would not be smaller than what it replaces.
            b = attrs.evolve(b, tail_start=b.head, kept=None)
        pruned = pruned_indices(messages, b.tail_start, b.protected_from)
        cut = cut_indices(messages, b.protected_from, budgets.tool_result_chars)
        pruned = tuple(i for i in pruned if i not in cut)
        if b.tail_start <= b.head and not pruned and not cut:
            return None
        cooling = state.context.cooldown_until is not None and now < state.context.cooldown_until
        return CompressionPlanned(
            reason=reason, estimated_tokens=estimate, window=window,
            message_count=len(messages), head=b.head, tail_start=b.tail_start, pruned=pruned,
            cut=cut, cut_chars=budgets.tool_result_chars,
            summarise=b.tail_start > b.head and not cooling,
            summary_budget=budgets.summary(middle_tokens(messages, b)), at=now, kept=b.kept,
            iterative=iterative)

    def summary_request(self, state: State, config: SessionSettings,
                        plan: CompressionPlanned) -> ModelRequest:
        assert state.turn is not None
        entry = config.chain[state.turn.provider_index]
        model = config.summary_model or entry.model
        window = (window_of(state, config)
                  if model == entry.model else
                  resolve_window(model, entry.provider, configured=None,
                                 probed=state.context.windows))
        max_tokens = int(plan.summary_budget * 1.3)
        previous = state.context.summary
        room = ((window.tokens - max_tokens) * CHARS_PER_TOKEN * 9 // 10
                - sm.prompt_overhead_chars(previous))
        middle = state.messages[plan.head:plan.tail_start]
        lines = sm.fit(sm.serialise(middle), max(room, 0))
        text = sm.prompt(lines, previous, plan.summary_budget)
        return ModelRequest(model=model, provider=entry.provider, api_mode=entry.api_mode,
                            purpose="compression", system_prompt=None,
                            messages=(Message(role="user", content=text),),
                            max_tokens=max_tokens, stream=False, base_url=entry.base_url,
                            credential_id=state.turn.credential_id)

    def summary(self, previous: str | None, written: str) -> str:
        return sm.merge_done(previous, written)

    def compacted(self, messages: Sequence[Message], plan: CompressionPlanned,
                  middle_text: str | None) -> tuple[Message, ...]:
        return compacted(messages, plan, middle_text)


_ENGINES: dict[str, ContextEngine] = {"compressor": Compressor()}


def register_context_engine(name: str, engine: ContextEngine) -> None:
    """Make ``engine`` available to sessions whose settings name it."""
    _ENGINES[name] = engine


def engine_for(config: SessionSettings) -> ContextEngine:
    try:
        return _ENGINES[config.context_engine]
    except KeyError:
        raise ValueError(f"no context engine named {config.context_engine!r}; registered: "
                         f"{', '.join(sorted(_ENGINES))}") from None
