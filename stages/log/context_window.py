"""How large a model's context window is: the configured number, else the provider's own
answer (recorded as ``ContextWindowProbed``), else a table of known models, else a safe
default. Every answer says where it came from."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import attrs

from stages.log.events import ContextWindowProbed, SessionSettings

DEFAULT_CONTEXT_WINDOW = 128_000
"""For a model nobody knows: small enough for most hosted models, large enough not to compress
a short conversation."""

# Longest matching substring of the model name wins (so "gpt-4o-mini" beats "gpt-4").
KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-6", 1_000_000), ("claude-sonnet-4-6", 1_000_000), ("claude", 200_000),
    ("gpt-5.5", 1_050_000), ("gpt-5.4", 1_050_000), ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576), ("gpt-4o", 128_000), ("gpt-4-turbo", 128_000), ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385), ("o1", 200_000), ("o3", 200_000), ("o4-mini", 200_000),
    ("gemini", 1_048_576), ("deepseek-v4", 1_000_000), ("deepseek", 128_000),
    ("qwen", 131_072), ("minimax", 204_800), ("glm", 202_752), ("kimi", 262_144),
    ("grok-4", 256_000), ("llama-3", 131_072), ("mistral", 131_072),
)


@attrs.frozen(kw_only=True)
class Window:
    tokens: int
    source: str


@functools.lru_cache(maxsize=256)  # asked several times per model call, for few models
def table_window(model: str) -> Window:
    """The table's window for ``model`` (longest substring match), else the default."""
    name = model.lower()
    best: tuple[str, int] | None = None
    for key, tokens in KNOWN_WINDOWS:
        if key in name and (best is None or len(key) > len(best[0])):
            best = (key, tokens)
    if best is None:
        return Window(tokens=DEFAULT_CONTEXT_WINDOW, source="default")
    return Window(tokens=best[1], source=f"table:{best[0]}")


def resolve_window(model: str, provider: str, *, configured: int | None,
                   probed: Iterable[ContextWindowProbed] = ()) -> Window:
    """Configured, else the provider's answer for this model, else the table."""
    if configured is not None:
        return Window(tokens=configured, source="config")
    for probe in probed:
        if probe.model == model and probe.provider == provider:
            return Window(tokens=probe.tokens, source=probe.source)
    return table_window(model)


def session_window(config: SessionSettings, probed: Iterable[ContextWindowProbed],
                   provider_index: int = 0) -> Window:
    """The window of the chain entry in use: the session's ``context_length`` is the
    primary's; a fallback may name its own."""
    entry = config.chain[provider_index]
    configured = config.context_length if provider_index == 0 else entry.context_length
    return resolve_window(entry.model, entry.provider, configured=configured, probed=probed)
