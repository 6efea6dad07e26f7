"""A tokenizer the user names for token recording (a session's ``tokenizer``, ``[tokens]
tokenizer``, ``--tokenizer``): a Hugging Face name or folder, or a ``.gguf`` model file.

It tokenises the prompt as the model's chat template renders it (the request's messages and
tools through ``apply_chat_template``, generation prompt last), in place of asking the server;
and it names the ids of a reply whose provider sent each token's text but no id (OpenAI's chat
and Responses logprobs). It must split the text as the serving model did: a piece it does not
read as exactly one token leaves the reply's ids None rather than guessing.

``transformers`` (the ``tokens`` extra) is imported on first use, never by the stages. Of a
``.gguf`` file only the metadata is read (``effects.providers.gguf_metadata``: vocabulary,
merges, chat template), converted by transformers' own GGUF tokenizer mapping: transformers'
whole-file GGUF loader needs torch, which a tokenizer does not.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import attrs

from effects.logs import get_logger
from effects.providers.gguf_metadata import read_metadata
from stages.decision import ModelRequest
from stages.errors import UsageError
from stages.log.events import ModelReplied
from stages.log.messages import Message
from stages.log.tokens import ReplyTokens

__all__ = ["PROMPT_SOURCE", "load_tokenizer", "prompt_ids", "reply_ids", "with_named_tokens"]

# ``ReplyTokens.prompt_source`` of a prompt the named tokenizer tokenised (the settings of the
# session name which one).
PROMPT_SOURCE = "tokenizer"

_log = get_logger(__name__)
_EXTRA = "pip install 'mibyan[tokens]'"


@functools.lru_cache(maxsize=4)
def load_tokenizer(name: str) -> Any:
    """The tokenizer ``name`` names, loaded once per process; a ``UsageError`` saying what to
    do when it cannot be (no ``tokens`` extra, no such folder or file, a Hub name offline)."""
    path = Path(name).expanduser()
    if (path.suffix == ".gguf" or name.startswith(("/", ".", "~"))) and not path.exists():
        # Said before transformers' import (seconds): a path that names nothing.
        raise UsageError(f"tokenizer {name!r} could not be loaded: no such file or folder")
    try:
        import transformers
    except ImportError as exc:
        raise UsageError(f"tokenizer {name!r} needs transformers: {_EXTRA}") from exc
    try:
        if path.suffix == ".gguf":
            return _from_gguf(path, transformers)
        return transformers.AutoTokenizer.from_pretrained(str(path) if path.exists() else name)
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"tokenizer {name!r} could not be loaded (a Hugging Face name needs "
                         f"the Hub or its cache; a folder needs tokenizer files; a file must "
                         f"be .gguf): {type(exc).__name__}: {str(exc)[:300]}") from exc


def _from_gguf(path: Path, transformers: Any) -> Any:
    from transformers.integrations.gguf import gguf_tokenizer_mapping as mapping
    meta = read_metadata(path, lambda key: key.startswith("tokenizer.")
                         or key == "general.architecture")
    grouped = {group: {name: meta[f"tokenizer.{key}"] for key, name in renames.items()
                       if f"tokenizer.{key}" in meta}
               for group, renames in mapping.GGUF_TOKENIZER_MAPPING.items()}
    vocabulary, config = grouped["tokenizer"], grouped["tokenizer_config"]
    for special, key in mapping._SPECIAL_TOKENS.items():
        index = meta.get(f"tokenizer.ggml.{key}")
        config[special] = vocabulary["tokens"][index] if index is not None else None
    backend, _ = mapping.convert_gguf_tokenizer(meta["general.architecture"], vocabulary)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, **config)


def _chat_message(message: Message) -> dict[str, Any]:
    """A message as chat templates read it: text content, tool-call arguments as objects."""
    out: dict[str, Any] = {"role": message.role, "content": message.text}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": json.loads(c.arguments or "{}")}}
            for c in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.role == "tool" and message.name is not None:
        out["name"] = message.name
    return out


def prompt_ids(tokenizer: Any, request: ModelRequest) -> tuple[int, ...]:
    """The request's prompt as the tokenizer's chat template renders it, tools included."""
    messages = [_chat_message(m) for m in request.messages]
    if request.system_prompt is not None:
        messages.insert(0, {"role": "system", "content": request.system_prompt})
    tools = [{"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": json.loads(t.parameters)}}
        for t in request.tools]
    ids = tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=True,
                                        add_generation_prompt=True)
    if not isinstance(ids, list):  # transformers 5 answers a BatchEncoding
        ids = ids["input_ids"]
    return tuple(int(i) for i in ids)


def reply_ids(tokenizer: Any, pieces: tuple[str, ...]) -> tuple[int, ...] | None:
    """The id of each piece the provider sent, where each is one token of this tokenizer (else
    None: the tokenizer is not the serving model's, and ids of another split would mislead)."""
    if not pieces:
        return None
    ids: list[int] = []
    for piece in pieces:
        one = tokenizer.encode(piece, add_special_tokens=False)
        if len(one) != 1:
            _log.info("tokens.pieces_not_this_tokenizers", piece=repr(piece)[:40],
                      ids=len(one))
            return None
        ids.append(int(one[0]))
    return tuple(ids)


def with_named_tokens(reply: ModelReplied, request: ModelRequest, tokenizer: Any) -> ModelReplied:
    """The reply with the prompt tokenised by ``tokenizer`` and, where the provider named none,
    the reply's ids. A template that fails on this prompt leaves ``prompt_ids`` None: the
    tokens are a record for training, never a reason to fail a turn."""
    tokens = reply.tokens or ReplyTokens()
    started = time.perf_counter()
    try:
        prompt: tuple[int, ...] | None = prompt_ids(tokenizer, request)
    except Exception as exc:  # any template error: the reply stands
        _log.warning("tokens.template_failed", error=f"{type(exc).__name__}: {str(exc)[:200]}")
        prompt = None
    ids = tokens.ids if tokens.ids is not None else reply_ids(tokenizer, tokens.pieces)
    _log.debug("tokens.tokenised", ms=round((time.perf_counter() - started) * 1000, 3))
    source = None if prompt is None else PROMPT_SOURCE
    return attrs.evolve(reply, tokens=attrs.evolve(tokens, ids=ids, prompt_ids=prompt,
                                                   prompt_source=source))
