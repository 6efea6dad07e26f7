"""Token-level samples of recorded sessions (those that ran with ``record_tokens``).

Each model call of the policy recorded its prompt as the server tokenised it and the tokens it
wrote. A session's calls are laid end to end into one sequence while each call's prompt begins
with everything before it (the prompt of call *n+1* is the sequence of call *n* and then the
tool results, the user's next message and the template's glue). Where it does not (a chat
template renders an earlier reply otherwise than the model wrote it: llama.cpp re-renders tool
calls as canonical JSON), a new sample starts: every sample holds exactly the tokens the model
saw, and its mask is true on exactly the tokens the model wrote (the end-of-turn token with
them), false on system, user, tool and template tokens. A call without ids (a provider that
names none, a reply whose text was redacted) ends the sample before it and is counted.

Pure over the log: nothing is asked of any server here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from pipeline.export.trajectory import _events
from stages.fold import apply_event
from stages.log.events import ModelReplied, ModelRequested, TurnFinished
from stages.log.state import State
from stages.log.tokens import ReplyTokens

__all__ = ["POLICY_PURPOSES", "Scorer", "TokenSample", "TokenSession", "read_token_session",
           "token_samples"]

# The calls whose replies are the policy's own: a turn's steps and its last word when the
# budget ran out (a compression's summary is not).
POLICY_PURPOSES = frozenset({"step", "budget_summary"})


@attrs.frozen(kw_only=True)
class TokenSample:
    """One sequence: ``mask[i]`` says the model wrote ``tokens[i]``; ``logprobs[i]`` is its
    logprob there, 0.0 where the mask is false."""

    tokens: tuple[int, ...]
    mask: tuple[bool, ...]
    logprobs: tuple[float, ...]
    calls: int  # how many model calls it spans

    def policy_tokens(self) -> list[int]:
        return [t for t, m in zip(self.tokens, self.mask, strict=True) if m]


@attrs.frozen(kw_only=True)
class TokenSession:
    """What a scorer sees of a session: its messages (OpenAI dicts, system prompt first),
    how its last turn ended, and its token samples."""

    session_id: str
    messages: tuple[dict[str, Any], ...]
    completed: bool
    final_response: str | None
    samples: tuple[TokenSample, ...]
    # Policy calls whose reply carried no usable ids (not asked, a provider naming none, a
    # redacted reply, a prompt the server could not tokenise).
    calls_without_tokens: int
    # The first user message, hashed: sessions of one task (a batch's rollouts of it) share
    # it, which makes them one group of an RL batch. Not the prompt's ids: each session's
    # system prompt carries its own data-boundary nonce.
    group_key: str | None


Scorer = Callable[[TokenSession], float]


def token_samples(calls: Sequence[ReplyTokens]) -> tuple[list[TokenSample], int]:
    """The calls laid end to end where each prompt extends the sequence before it (see the
    module doc); and how many calls had no usable ids."""
    samples: list[TokenSample] = []
    tokens: list[int] = []
    mask: list[bool] = []
    logprobs: list[float] = []
    spans, skipped = 0, 0

    def close() -> None:
        nonlocal spans
        if spans:
            samples.append(TokenSample(tokens=tuple(tokens), mask=tuple(mask),
                                       logprobs=tuple(logprobs), calls=spans))
        tokens.clear()
        mask.clear()
        logprobs.clear()
        spans = 0

    for call in calls:
        if call.ids is None or call.prompt_ids is None:
            skipped += 1
            close()
            continue
        prompt = call.prompt_ids
        if not (spans and len(prompt) >= len(tokens) and prompt[:len(tokens)] == tuple(tokens)):
            close()
        added = prompt[len(tokens):]
        tokens.extend(added)
        mask.extend([False] * len(added))
        logprobs.extend([0.0] * len(added))
        tokens.extend(call.ids)
        mask.extend([True] * len(call.ids))
        logprobs.extend(call.logprobs)
        spans += 1
    close()
    return samples, skipped


def read_token_session(root: Path, session_id: str) -> TokenSession:
    """The token samples of one session's log (checked as every export reads it)."""
    state, purpose = State(), None
    calls: list[ReplyTokens | None] = []
    finished: TurnFinished | None = None
    for _seq, _digest, event in _events(root, session_id):
        state = apply_event(state, event)
        if isinstance(event, ModelRequested):
            purpose = event.purpose
        elif isinstance(event, ModelReplied) and purpose in POLICY_PURPOSES:
            calls.append(event.tokens)
        elif isinstance(event, TurnFinished):
            finished = event
    usable = [c for c in calls if c is not None]
    samples, skipped = token_samples(usable)
    first = next((m.text for m in state.messages if m.role == "user"), None)
    return TokenSession(
        session_id=session_id, messages=tuple(_messages(state)),
        completed=bool(finished and finished.completed),
        final_response=finished.final_response if finished else None,
        samples=tuple(samples), calls_without_tokens=skipped + len(calls) - len(usable),
        group_key=None if first is None else _key(first))


def _messages(state: State) -> Iterator[dict[str, Any]]:
    if state.system_prompt:
        yield {"role": "system", "content": state.system_prompt}
    for message in state.messages:
        out = message.to_openai()
        out.pop("reasoning", None)
        yield out


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
