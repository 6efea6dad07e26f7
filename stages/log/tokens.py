"""Token-level record of one model call (opt-in per session: ``record_tokens``).

What an RL trainer needs of the policy's call: the ids of the tokens it wrote, their text
pieces and logprobs, and the prompt's tokenisation by the serving model. It rides on the
reply event (``ModelReplied.tokens``), an observation like the reply itself, so replay serves
it from the log and nothing a stage decides reads it.
"""

from __future__ import annotations

import attrs

__all__ = ["ReplyTokens"]


def _same_length(instance: ReplyTokens, attribute: attrs.Attribute, value: object) -> None:
    del attribute
    lengths = {len(instance.pieces), len(instance.logprobs)}
    if instance.ids is not None:
        lengths.add(len(instance.ids))
    if len(lengths) > 1:
        raise ValueError(f"token ids, pieces and logprobs differ in length: {value!r}")


@attrs.frozen(kw_only=True)
class ReplyTokens:
    """The completion's tokens (``ids`` None where the provider names no ids, as OpenAI's API
    does) and the prompt's ids as the server tokenised it (None when it could not be asked).
    ``withheld`` says why ids and pieces were dropped (``"redacted"``: the reply held text
    the log masks, which the ids would spell out)."""

    pieces: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = attrs.field(default=(), validator=_same_length)
    ids: tuple[int, ...] | None = None
    prompt_ids: tuple[int, ...] | None = None
    # Where the prompt's ids came from: "llama.cpp" (/apply-template + /tokenize), "vllm".
    prompt_source: str | None = None
    withheld: str | None = None
