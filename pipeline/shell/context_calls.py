"""The shell's side of context management: the summary call, the window probe, and the
session lineage (compression continues a session in a child session)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from effects.logs import get_logger
from effects.providers.window_probe import probe_context_window
from stages.errors import UsageError
from stages.log.events import (
    ContextSummarised,
    ContextWindowProbed,
    Event,
    Interrupted,
    ModelFailed,
    ModelReplied,
    SummaryFailed,
)
from stages.turn.decision import Summarise

if TYPE_CHECKING:
    from pipeline.shell.runner import SessionRunner

log = get_logger(__name__)

# Answers how large a model's window is: (model, base_url) -> (tokens, source), or None.
WindowProbe = Callable[[str, str | None], tuple[int, str] | None]


HOSTED = ("openai", "anthropic", "openrouter")
_FRACTIONS = ("preflight_threshold", "between_turns_threshold")


def context_values(section: Mapping[str, Any], **given: Any) -> dict[str, Any]:
    """The session's context settings: the arguments, else config.toml's ``[context]``
    (``compression``, ``preflight_threshold``, ``between_turns_threshold``,
    ``protect_last_n``, ``summary_model``, ``context_engine``); checked here, so that a bad
    value is a ``UsageError`` naming it."""
    if not isinstance(section, Mapping):
        raise UsageError(f"[context] in config.toml must be a table, got {section!r}")
    values = {name: value if value is not None else section.get(name)
              for name, value in given.items()}
    out: dict[str, Any] = {}
    for name in _FRACTIONS:
        value = values[name]
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0 < value <= 1:
                raise UsageError(f"{name} must be a fraction in (0, 1], got {value!r}")
            out[name] = float(value)
    if values["compression"] is not None:
        if not isinstance(values["compression"], bool):
            raise UsageError(f"compression must be true or false, got {values['compression']!r}")
        out["compression_enabled"] = values["compression"]
    protect = values["protect_last_n"]
    if protect is not None:
        if isinstance(protect, bool) or not isinstance(protect, int) or protect < 1:
            raise UsageError(f"protect_last_n must be a whole number of at least 1, "
                             f"got {protect!r}")
        out["protect_last_n"] = protect
    for name in ("summary_model", "context_engine"):
        if values[name] is not None:
            if not isinstance(values[name], str) or not values[name]:
                raise UsageError(f"{name} must be a name, got {values[name]!r}")
            out[name] = values[name]
    return out


def window_probe(provider: str, api_key: str | None) -> WindowProbe | None:
    """A probe for the local model and self-hosted OpenAI-compatible servers; the hosted
    providers' windows come from the table."""
    if provider in HOSTED:
        return None

    def probe(model: str, base_url: str | None) -> tuple[int, str] | None:
        if not base_url:
            return None
        return probe_context_window(base_url, model, api_key=api_key or None)
    return probe


def perform_summary(runner: SessionRunner, effect: Summarise) -> tuple[Event]:
    """The auxiliary call through the session's own call path; its failure is an outcome.
    The memory providers see the conversation first (``on_pre_compress``): what they want kept
    is added to the summary, and so recorded with it."""
    memory = runner.effects.memory
    kept = memory.on_pre_compress(runner.state.messages) if memory is not None else ""
    event = runner.call_model(effect.request)
    if isinstance(event, ModelReplied):
        text = (event.message.content or "").strip()
        if text:
            if kept:
                text = f"{text}\n\n{kept}"
            return (ContextSummarised(text=text, model=event.model, usage=event.usage,
                                      latency_ms=event.latency_ms),)
        return (SummaryFailed(error_type="EmptySummary",
                              message="the summariser returned no text"),)
    if isinstance(event, Interrupted):
        # The turn's next poll sees the interrupt; the summary is given up.
        runner.interrupt.set()
        return (SummaryFailed(error_type="Interrupted", message="interrupted by user"),)
    assert isinstance(event, ModelFailed), event
    return (SummaryFailed(error_type=event.error_type, message=event.message),)


def probe_window(probe: WindowProbe | None, provider: str, model: str,
                 base_url: str | None) -> tuple[ContextWindowProbed, ...]:
    """The provider's own answer, when it gives one; a failing probe is no answer."""
    if probe is None:
        return ()
    try:
        answer = probe(model, base_url)
    except Exception as exc:  # a probe is a hint: the table and the default remain
        log.info("context_window_probe_failed", error=f"{type(exc).__name__}: {exc}")
        return ()
    if answer is None:
        return ()
    tokens, source = answer
    return (ContextWindowProbed(provider=provider, model=model, tokens=tokens, source=source),)


def record_window(runner: SessionRunner, probe: WindowProbe | None) -> None:
    """Ask the provider for the primary model's window once per session (rules 3), unless the
    configuration says it."""
    settings = runner.settings
    entry = settings.chain[0]
    known = any((w.provider, w.model) == (entry.provider, entry.model)
                for w in runner.state.context.windows)
    if settings.rules < 3 or settings.context_length is not None or known:
        return
    events = probe_window(probe, entry.provider, entry.model, entry.base_url)
    if events:
        runner.observe("session", (ContextWindowProbed,), lambda: events)
