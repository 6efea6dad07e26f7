"""Atropos' ``ScoredDataGroup`` as a pydantic model, written from its source
(``atroposlib/envs/base.py``, a ``TypedDict``): ``atroposlib`` itself pulls in transformers,
wandb and its trainer stack, too much for a dev dependency. On top of the types, what its
trainers rely on: one entry per member in every list, a mask per token that is the token's id
(trained) or -100 (not), a logprob per token."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

IGNORED = -100


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")  # tool_calls, tool_call_id, ... of OpenAI's shape

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[Any] | None


class ScoredDataGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[list[int]]
    masks: list[list[int]]
    scores: list[float]
    advantages: list[list[float]] | None = None
    ref_logprobs: list[list[float]] | None = None
    messages: list[list[Message]] | None = None
    generation_params: dict[str, Any] | None = None
    inference_logprobs: list[list[float]] | None = None
    group_overrides: dict[str, Any] | None = None
    overrides: list[dict[str, Any]] | None = None
    images: Any | None = None

    @model_validator(mode="after")
    def _aligned(self) -> ScoredDataGroup:
        members = len(self.tokens)
        for name in ("masks", "scores", "messages", "inference_logprobs"):
            value = getattr(self, name)
            if value is not None and len(value) != members:
                raise ValueError(f"{name} has {len(value)} entries for {members} members")
        for tokens, mask in zip(self.tokens, self.masks, strict=True):
            if len(tokens) != len(mask):
                raise ValueError("a mask differs in length from its tokens")
            if any(m not in (t, IGNORED) for t, m in zip(tokens, mask, strict=True)):
                raise ValueError("a mask entry is neither its token's id nor -100")
            if all(m == IGNORED for m in mask):
                raise ValueError("a member has nothing to train on")
        for tokens, logprobs in zip(self.tokens, self.inference_logprobs or self.tokens,
                                    strict=True):
            if len(tokens) != len(logprobs):
                raise ValueError("inference_logprobs differ in length from the tokens")
        return self
