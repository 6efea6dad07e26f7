"""Routing stage: smart model routing, optional and off by default.

With a ``cheap_model`` in the settings, the first call of a turn whose user message is simple
goes to that model for the whole turn: at most 160 characters and 28 words, at most one line
break, no backtick, no URL, and none of the words that mark a complex task (debug, implement,
refactor, traceback, test, plan, ...). The choice and its reason are a ``route_chosen`` event;
a failed call of the cheap model clears the route, so the retry goes to the primary.
"""

from __future__ import annotations

import re

from stages.decision import NOTHING, Decision
from stages.log.events import RouteChosen, SessionSettings
from stages.log.state import State

__all__ = ["COMPLEX_KEYWORDS", "MAX_SIMPLE_CHARS", "MAX_SIMPLE_WORDS", "decide_routing",
           "why_complex"]

MAX_SIMPLE_CHARS = 160
MAX_SIMPLE_WORDS = 28
COMPLEX_KEYWORDS = frozenset({
    "debug", "debugging", "implement", "implementation", "refactor", "patch", "traceback",
    "stacktrace", "exception", "error", "analyze", "analysis", "investigate", "architecture",
    "design", "compare", "benchmark", "optimize", "optimise", "review", "terminal", "shell",
    "tool", "tools", "pytest", "test", "tests", "plan", "planning", "delegate", "subagent",
    "cron", "docker", "kubernetes"})
_URL = re.compile(r"https?://|www\.", re.I)
_PUNCTUATION = ".,;:!?()[]{}\"'<>*_#/\\"


def why_complex(text: str) -> str | None:
    """Why ``text`` needs the primary model, or None when it is a simple message."""
    if not text.strip():
        return "empty message"
    if len(text) > MAX_SIMPLE_CHARS:
        return f"longer than {MAX_SIMPLE_CHARS} characters"
    words = text.split()
    if len(words) > MAX_SIMPLE_WORDS:
        return f"more than {MAX_SIMPLE_WORDS} words"
    if text.count("\n") > 1:
        return "several lines"
    if "`" in text:
        return "code"
    if _URL.search(text):
        return "a URL"
    keyword = next((w for w in (w.strip(_PUNCTUATION).lower() for w in words)
                    if w in COMPLEX_KEYWORDS), None)
    return None if keyword is None else f"the word {keyword!r}"


def decide_routing(state: State, *, config: SessionSettings) -> Decision:
    cheap = config.cheap_model
    turn = state.turn
    if cheap is None or turn is None or turn.api_calls > 0:
        return NOTHING
    message = state.messages[turn.first_message]
    reason = why_complex(message.text)
    if reason is None:
        return Decision(events=(RouteChosen(route="cheap", reason="simple_turn",
                                            model=cheap.model),))
    return Decision(events=(RouteChosen(route="primary", reason=f"complex: {reason}",
                                        model=config.model),))
