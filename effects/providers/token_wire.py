"""Token-level recording over OpenAI-shaped chat endpoints (a session's ``record_tokens``).

Asked with ``"logprobs": true``, the endpoints answer each generated token's text and logprob
(``choices[0].logprobs.content``, per chunk when streamed). The ids come with them where the
server names them: llama.cpp writes ``id`` in each entry; vLLM writes the token as
``token_id:<n>`` when asked with ``return_tokens_as_token_ids``; OpenAI names none.

The prompt's tokenisation is asked of the serving model after the reply, beside the chat
endpoint: llama.cpp renders the very request body with its chat template (``/apply-template``)
and tokenises that (``/tokenize``); vLLM tokenises chat messages itself (``/tokenize`` with
``messages``). A server with neither leaves ``prompt_ids`` None, and the call stands: the
tokens are a record for training, never a reason to fail a turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from effects.logs import get_logger
from stages.decision import ModelRequest
from stages.errors import MibyanError, ModelBehaviourError
from stages.log.tokens import ReplyTokens

__all__ = ["LOGPROBS_INCLUDE", "TokenCollector", "logprob_fields", "prompt_tokens",
           "responses_tokens"]

# What a Responses request includes to have each output_text part (and each text delta of a
# stream) carry its tokens' ``logprobs``; the API names no ids.
LOGPROBS_INCLUDE = "message.output_text.logprobs"

VLLM_PROVIDERS = ("vllm",)
_VLLM_ID_PREFIX = "token_id:"

_log = get_logger(__name__)

# Posts a JSON body to a path beside the chat endpoint ("/tokenize"); the decoded answer.
Post = Callable[[str, bytes], Any]


def logprob_fields(request: ModelRequest) -> dict[str, object]:
    """What a request recording tokens adds to the body (nothing for one that does not)."""
    if not request.logprobs:
        return {}
    fields: dict[str, object] = {"logprobs": True}
    if request.provider in VLLM_PROVIDERS:
        fields["return_tokens_as_token_ids"] = True
    return fields


class TokenCollector:
    """Gathers ``logprobs.content`` entries of a reply, whole or chunk by chunk."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.logprobs: list[float] = []
        self.ids: list[int | None] = []

    def feed(self, choice: Mapping[str, Any]) -> None:
        logprobs = choice.get("logprobs")
        self.extend(logprobs.get("content") if isinstance(logprobs, dict) else None)

    def extend(self, entries: object) -> None:
        """Adds ``{"token", "logprob", ...}`` entries (a chat choice's ``logprobs.content``, a
        Responses ``output_text`` part's or delta's ``logprobs``); anything else adds none."""
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict):
                self._add(entry)

    def _add(self, entry: Mapping[str, Any]) -> None:
        token = entry.get("token")
        token = token if isinstance(token, str) else ""
        ident = entry.get("id")
        named = token.removeprefix(_VLLM_ID_PREFIX)
        if named != token and named.isdigit():  # vLLM's form
            ident = int(named)
            raw = entry.get("bytes")
            token = bytes(raw).decode("utf-8", "replace") if isinstance(raw, list) else ""
        logprob = entry.get("logprob")
        self.pieces.append(token)
        self.logprobs.append(float(logprob) if isinstance(logprob, (int, float)) else 0.0)
        self.ids.append(ident if type(ident) is int else None)

    def record(self, prompt: tuple[tuple[int, ...] | None, str | None]) -> ReplyTokens:
        ids = self.ids
        return ReplyTokens(pieces=tuple(self.pieces), logprobs=tuple(self.logprobs),
                           ids=None if not ids or None in ids else tuple(i for i in ids
                                                                         if i is not None),
                           prompt_ids=prompt[0], prompt_source=prompt[1])


def responses_tokens(parts: list, deltas: list | tuple) -> ReplyTokens:
    """A Responses reply's tokens: the ``logprobs`` of its final ``output_text`` parts (with
    each token's bytes), else those its text deltas carried (a stream whose final response
    came without them). No Responses server tokenises a prompt for its caller: a named
    tokenizer may (``effects.providers.named_tokenizer``)."""
    collector = TokenCollector()
    collector.extend(list(parts or deltas))
    return collector.record((None, None))


def prompt_tokens(post: Post, body: bytes,
                  request: ModelRequest) -> tuple[tuple[int, ...] | None, str | None]:
    """The prompt's ids as the server tokenised it, and which way it was asked; ``(None,
    None)`` when the server offers neither way (or failed: the reply stands)."""
    try:
        rendered = post("/apply-template", _unstreamed(body))
        if isinstance(rendered, dict) and isinstance(rendered.get("prompt"), str):
            answer = post("/tokenize", json.dumps({
                "content": rendered["prompt"], "add_special": True,
                "parse_special": True}).encode())
            return _ids(answer), "llama.cpp"
    except MibyanError as exc:  # a 404: no llama.cpp server; try vLLM's way
        _log.debug("tokens.apply_template_failed", error=str(exc)[:200])
    try:
        answer = post("/tokenize", _vllm_tokenize(body, request))
        return _ids(answer), "vllm"
    except MibyanError as exc:
        _log.info("tokens.prompt_not_tokenised", provider=request.provider, error=str(exc)[:200])
    return None, None


def _unstreamed(body: bytes) -> bytes:
    payload = json.loads(body)
    payload.pop("stream", None)
    payload.pop("stream_options", None)
    return json.dumps(payload).encode()


def _vllm_tokenize(body: bytes, request: ModelRequest) -> bytes:
    payload = json.loads(body)
    asked = {"model": request.model, "messages": payload["messages"],
             "add_generation_prompt": True}
    if payload.get("tools"):
        asked["tools"] = payload["tools"]
    return json.dumps(asked).encode()


def _ids(answer: Any) -> tuple[int, ...]:
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    # llama.cpp answers [] to a body it cannot read (vLLM's form): no tokens is no answer.
    if not isinstance(tokens, list) or not tokens:
        raise ModelBehaviourError(f"the server's /tokenize answered no tokens: {str(answer)[:200]}")
    # llama.cpp answers ids, or {"id", "piece"} objects when asked for pieces.
    return tuple(t["id"] if isinstance(t, dict) else int(t) for t in tokens)
