"""What the adapters share about reasoning: the request fields of the OpenAI-shaped APIs, and a
stream's split of content into visible text and ``<think>`` reasoning with a sink for each.

Chat completions take ``reasoning_effort`` (an effort; a budget is mapped to the nearest one);
OpenRouter takes its own ``reasoning`` object (``{"effort": ...}`` or ``{"max_tokens": ...}``).
``prompt_cache_key`` (the session id, so OpenAI's prompt cache hits across the calls of a
session) goes only to OpenAI itself: other OpenAI-compatible servers may refuse unknown fields.

DeepSeek's and Moonshot's (Kimi) thinking models document that the ``reasoning_content`` of an
assistant message must come back with it on the next request (a tool loop fails without it):
to those endpoints (:func:`echoes_reasoning`) assistant messages carry their reasoning back,
unless the reasoning-replay switch is off. Other servers never get the field.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit

from effects.protocols import DeltaSink
from stages.decision import ModelRequest
from stages.recovery.reasoning import effort_of
from stages.turn.think_tags import ThinkSplitter

__all__ = ["ContentSplit", "chat_reasoning_fields", "echoes_reasoning", "is_openai",
           "is_openrouter"]

OPENAI_PROVIDERS = ("openai", "openai-codex", "codex")
# Chat-completions endpoints that take (and in a tool loop require) ``reasoning_content`` back.
ECHO_PROVIDERS = ("deepseek", "moonshot", "kimi")
ECHO_HOSTS = ("deepseek.com", "moonshot.ai", "moonshot.cn")


def _host(request: ModelRequest) -> str:
    return _hostname(request.base_url or "")


@functools.lru_cache(maxsize=64)  # parsed three times per request, and a session has one URL
def _hostname(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def is_openrouter(request: ModelRequest) -> bool:
    return request.provider == "openrouter" or _host(request).endswith("openrouter.ai")


def is_openai(request: ModelRequest) -> bool:
    """OpenAI's own API (not a compatible server): ``prompt_cache_key`` is understood."""
    host = _host(request)
    if host:
        return host.endswith("openai.com") or host.endswith("chatgpt.com")
    return request.provider in OPENAI_PROVIDERS


def echoes_reasoning(request: ModelRequest) -> bool:
    """Whether assistant messages send their ``reasoning_content`` back to this endpoint."""
    host = _host(request)
    return request.replay_reasoning and (
        request.provider in ECHO_PROVIDERS
        or any(host == h or host.endswith("." + h) for h in ECHO_HOSTS))


def chat_reasoning_fields(request: ModelRequest) -> dict[str, Any]:
    """The chat-completions body fields for the request's reasoning and cache key."""
    out: dict[str, Any] = {}
    effort, budget = request.reasoning_effort, request.reasoning_budget
    if is_openrouter(request):
        if budget is not None and effort is None:
            out["reasoning"] = {"max_tokens": budget}
        elif effort is not None:
            out["reasoning"] = {"effort": effort}
    elif (mapped := effort_of(effort, budget)) is not None:
        out["reasoning_effort"] = mapped
    if request.cache_key is not None and is_openai(request):
        out["prompt_cache_key"] = request.cache_key
    return out


class ContentSplit:
    """Streamed content split into visible text (to ``on_delta``) and ``<think>`` reasoning
    (to ``on_reasoning``), each also kept whole."""

    def __init__(self, on_delta: DeltaSink | None, on_reasoning: DeltaSink | None) -> None:
        self.on_delta, self.on_reasoning = on_delta, on_reasoning
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self._splitter = ThinkSplitter()

    def content(self, piece: str) -> None:
        self._route(self._splitter.feed(piece))

    def thought(self, piece: str) -> None:
        """Reasoning the server sent apart (``reasoning_content``, thinking deltas)."""
        self._route([("reasoning", piece)])

    def finish(self) -> None:
        self._route(self._splitter.finish())

    @property
    def delivered(self) -> bool:
        """Visible text reached the caller."""
        return bool(self.text) and self.on_delta is not None

    def _route(self, pieces: list[tuple[str, str]]) -> None:
        for kind, piece in pieces:
            if kind == "text":
                self.text.append(piece)
                if self.on_delta is not None:
                    self.on_delta(piece)
            else:
                self.reasoning.append(piece)
                if self.on_reasoning is not None:
                    self.on_reasoning(piece)
