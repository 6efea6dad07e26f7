"""Pure conversion between mibyan's canonical (OpenAI-format) messages and Anthropic Messages.

:func:`to_anthropic` turns a canonical :class:`ModelRequest` into the ``messages.create``
keyword arguments, and :func:`request_body` into the same as JSON bytes, from each message's
blocks converted once and cached as JSON text (as the OpenAI adapters do): ``system`` text
blocks, ``tool_use`` blocks (``{}`` for arguments that are not a JSON object), each run of tool
results as ``tool_result`` blocks in ONE user turn (with any user text that follows), orphan results
dropped, a stub error result for each unanswered ``tool_use``, same-role messages merged, and
``cache_control`` on the last block each marked canonical message became.

Reasoning goes back only as the signed ``thinking`` / ``redacted_thinking`` blocks this
provider issued, first in each assistant message, when the request enables thinking (see
:mod:`effects.providers.anthropic_thinking`: mid tool loop only with the last assistant message's
signed
block); the plain reasoning text is never sent.

:func:`message_from`, :func:`usage_from` and :func:`finish_reason` read a reply back (they live
in :mod:`effects.providers.anthropic_reply`).
"""

from __future__ import annotations

import json
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import cast

import attrs

from effects.providers.anthropic_reply import STOP_REASONS, finish_reason, message_from, usage_from
from effects.providers.anthropic_thinking import (
    THINKING_BUDGET,
    THINKING_TYPES,
    replay_provider,
    thinking_blocks,
    thinking_config,
    unsigned_thinking,
)
from effects.providers.wire import WireCache, arguments_object
from stages.decision import ModelRequest
from stages.errors import UsageError
from stages.log.content_parts import ImagePart, TextPart
from stages.log.messages import Message, canonical_json
from stages.log.tool_specs import ToolSpec

__all__ = ["DEFAULT_MAX_TOKENS", "STOP_REASONS", "THINKING_BUDGET", "finish_reason",
           "message_from", "request_body", "to_anthropic", "usage_from"]

DEFAULT_MAX_TOKENS = 4096
_BAD_ID = re.compile(r"[^a-zA-Z0-9_-]")

# ---- canonical history -> Anthropic ------------------------------------------------------


def _tool_id(raw: str | None) -> str:
    return _BAD_ID.sub("_", raw or "") or "tool_0"


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def _part(part: TextPart | ImagePart) -> dict:
    """A text or image content block; an image as base64 (from the ``data:`` URL the send
    path made of the stored bytes) or as a URL Anthropic fetches."""
    if isinstance(part, TextPart):
        return _text(part.text)
    url = part.url or ""
    if url.startswith("data:"):
        head, _, data = url.partition(",")
        media_type = head[5:].removesuffix(";base64")
        return {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                            "data": data}}
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"an image that was not made sendable: {part.ref[:80]}")
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(message: Message, provider: str | None = None, *,
            reasoning_text: str | None = None) -> tuple[str, list[dict]]:
    """The Anthropic role and content blocks of one canonical message (an assistant's with
    the thinking blocks ``provider`` issued first, when given, or its reasoning as text)."""
    if message.role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": _tool_id(message.tool_call_id),
                         "content": message.text or "(no output)"}]
    if message.images:
        return "user", [_part(part) for part in cast(tuple, message.content)
                        if not isinstance(part, TextPart) or part.text.strip()]
    has_text = bool(message.text.strip())
    if message.role == "user":
        return "user", [_text(message.text if has_text else "(empty message)")]
    blocks = [_text(message.text)] if has_text else []
    if reasoning_text:
        blocks.insert(0, _text(f"<thinking>\n{reasoning_text}\n</thinking>"))
    blocks += [{"type": "tool_use", "id": _tool_id(c.id), "name": c.name,
                "input": arguments_object(c.arguments)} for c in message.tool_calls]
    thinking = thinking_blocks(message, provider) if provider is not None else []
    return "assistant", thinking + (blocks or [_text("(empty)")])


def _merged(turns: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    out: list[tuple[str, list[dict]]] = []
    for role, blocks in turns:
        if not blocks:
            continue
        if out and out[-1][0] == role:
            # Thinking opens an assistant turn: a merged-in turn's own thinking is dropped.
            kept = [b for b in blocks if b["type"] not in THINKING_TYPES]
            out[-1] = (role, out[-1][1] + kept)
        else:
            out.append((role, blocks))  # block lists are never changed in place
    return out


def _paired(turns: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    """Each user turn keeps only the results of the previous assistant's ``tool_use`` blocks
    (first), and gets a stub error result for each one left unanswered."""
    out: list[tuple[str, list[dict]]] = []
    for k, (role, blocks) in enumerate(turns):
        if role == "assistant":
            if all(b["type"] != "tool_use" for b in blocks):  # the common case, at once
                out.append((role, blocks))
                continue
            seen: set[str] = set()  # tool_use ids must be unique within a message
            kept = []
            for block in blocks:
                if block["type"] == "tool_use":
                    if block["id"] in seen:
                        continue
                    seen.add(block["id"])
                kept.append(block)
            blocks = kept
            out.append((role, blocks))
            wanted = [b["id"] for b in blocks if b["type"] == "tool_use"]
            if wanted and (k + 1 == len(turns) or turns[k + 1][0] != "user"):
                out.append(("user", _stubs(wanted)))
            continue
        previous = out[-1][1] if out and out[-1][0] == "assistant" else []
        wanted = [b["id"] for b in previous if b["type"] == "tool_use"]
        if not wanted and all(b["type"] != "tool_result" for b in blocks):
            out.append((role, blocks))
            continue
        results: dict[str, dict] = {}
        for b in blocks:
            if b["type"] == "tool_result" and b["tool_use_id"] in wanted:
                results.setdefault(b["tool_use_id"], b)
        others = [b for b in blocks if b["type"] != "tool_result"]
        missing = [i for i in wanted if i not in results]
        out.append((role, list(results.values()) + _stubs(missing) + others))
    return _merged(out)


def _stubs(ids: list[str]) -> list[dict]:
    return [{"type": "tool_result", "tool_use_id": i, "is_error": True,
             "content": "(tool result missing)"} for i in dict.fromkeys(ids)]


def _place_marks(request: ModelRequest, system: list[dict], emitted: list[tuple[dict, ...]],
                 alive: AbstractSet[int] | _Alive) -> dict[int, dict]:
    """``cache_control`` for the last surviving block of each marked canonical message (or of
    the nearest one before it, when the marked message was dropped), by block identity: the
    blocks themselves are shared by every request and never changed."""
    marker = {"type": "ephemeral", **({"ttl": "1h"} if request.cache_ttl == "1h" else {})}
    marks: dict[int, dict] = {}
    for index in request.cache_marks:
        if index == -1:
            if system:
                marks[id(system[0 if request.system_prompt else -1])] = marker
            continue
        if not 0 <= index < len(emitted):
            raise UsageError(f"cache mark {index} is outside the {len(emitted)} messages")
        for j in range(index, -1, -1):
            block = next((b for b in reversed(emitted[j]) if id(b) in alive), None)
            if block is not None:
                marks[id(block)] = marker
                break
    return marks


def _tool_choice(choice: str | None) -> dict | None:
    if choice is None:
        return None
    kinds = {"auto": "auto", "none": "none", "required": "any"}
    return {"type": kinds[choice]} if choice in kinds else {"type": "tool", "name": choice}


@attrs.frozen
class _Converted:
    """One canonical message as Anthropic blocks, with each block's JSON text (and, for a
    text block, its text as a JSON string), made once per message."""

    role: str | None  # None: a system message
    blocks: tuple[dict, ...]
    texts: tuple[tuple[str, str | None], ...]
    by_id: tuple[tuple[int, tuple[str, str | None]], ...]  # the texts, keyed for one update


def _convert(message: Message, provider: str | None = None, *,
             reasoning_text: str | None = None) -> _Converted:
    if message.role == "system":
        role, blocks = None, [_text(message.text)] if message.content else []
    else:
        role, blocks = _blocks(message, provider, reasoning_text=reasoning_text)
    texts = tuple((canonical_json(b), json.dumps(b["text"], ensure_ascii=False)
                   if b["type"] == "text" else None) for b in blocks)
    return _Converted(role=role, blocks=tuple(blocks), texts=texts,
                      by_id=tuple(zip(map(id, blocks), texts, strict=True)))


_converted: WireCache[Message, _Converted] = WireCache(_convert)
# With the thinking blocks a provider issued: one cache per provider.
_converted_thinking: dict[str, WireCache[Message, _Converted]] = {}


# With the unsigned thinking a provider issued, as text: one cache per provider.
_converted_unsigned: dict[str, WireCache[Message, _Converted]] = {}


def _converted_for(message: Message, provider: str | None, text_for: str | None) -> _Converted:
    if text_for is not None and message.reasoning_parts \
            and unsigned_thinking(message, text_for) is not None:
        cache = _converted_unsigned.get(text_for)
        if cache is None:
            cache = _converted_unsigned.setdefault(text_for, WireCache(
                lambda m: _convert(m, reasoning_text=unsigned_thinking(m, text_for))))
        return cache(message)
    if provider is None or not message.reasoning_parts:
        return _converted(message)
    cache = _converted_thinking.get(provider)
    if cache is None:
        cache = _converted_thinking.setdefault(
            provider, WireCache(lambda m: _convert(m, provider)))
    return cache(message)
_tool_json: WireCache[ToolSpec, str] = WireCache(lambda t: canonical_json({
    "name": t.name, "description": t.description, "input_schema": json.loads(t.parameters)}))


@attrs.frozen
class _Prefix:
    """The settled start of a history, converted once: the first ``len(messages)`` messages,
    cut where nothing after them can change how they are sent (see :func:`_boundary`)."""

    messages: tuple[Message, ...]  # held, so that identity says "the same messages"
    system: tuple[dict, ...]  # blocks of system messages among them
    emitted: tuple[tuple[dict, ...], ...]  # per message, the blocks it became
    texts: dict[int, tuple[str, str | None]]  # read-only once built
    alive: frozenset[int]  # the blocks that are sent (in ``turns``)
    turns: tuple[tuple[str, list[dict]], ...]  # paired and merged
    json: str  # ``turns`` as message objects, comma-joined, without cache marks


_NO_PREFIX = _Prefix(messages=(), system=(), emitted=(), texts={}, alive=frozenset(), turns=(),
                     json="")


@attrs.frozen
class _Plan:
    """A request in Anthropic's terms, before it is written as a dict or as JSON text."""

    head: dict  # every field but "messages" and "tools", marks on system blocks applied
    prefix: _Prefix  # the first turns, sent as they are (no mark falls on them)
    turns: list[tuple[str, list[dict]]]  # the turns after the prefix
    marks: dict[int, dict]
    texts: dict[int, tuple[str, str | None]]  # of the blocks after the prefix
    # What a longer prefix is made of: where the history could be cut (message, turn and
    # system block counts), the turns after the prefix before pairing, the blocks.
    cuts: list[tuple[int, int, int]]
    merged: list[tuple[str, list[dict]]]
    system: list[dict]
    emitted: list[tuple[dict, ...]]


def _settled_end(turn: tuple[str, list[dict]]) -> bool:
    """An assistant turn without ``tool_use``: what follows can neither pair with it nor add
    stub results to it."""
    return turn[0] == "assistant" and all(b["type"] != "tool_use" for b in turn[1])


def _plan(request: ModelRequest, prefix: _Prefix = _NO_PREFIX) -> _Plan:
    """Convert the messages after ``prefix`` (whose messages start ``request.messages``)."""
    thinking_from = replay_provider(request, _thinking(request)[0])
    text_for = request.provider if request.replay_reasoning else None
    system = [_text(request.system_prompt)] if request.system_prompt else []
    system.extend(prefix.system)
    turns: list[tuple[str, list[dict]]] = []
    emitted = list(prefix.emitted)
    texts: dict[int, tuple[str, str | None]] = {}
    known, cuts = prefix.texts, []
    start = len(prefix.messages)
    for index, message in enumerate(request.messages[start:], start):
        converted = _converted_for(message, thinking_from, text_for)
        blocks = converted.blocks
        if blocks and (id(blocks[0]) in texts or id(blocks[0]) in known):
            blocks = tuple(dict(b) for b in blocks)  # the same message again: marks go by id
            texts.update(zip(map(id, blocks), converted.texts, strict=True))
        else:
            texts.update(converted.by_id)
        emitted.append(blocks)
        if converted.role is None:
            system.extend(blocks)
        elif turns and turns[-1][0] == converted.role:
            # A merged assistant message keeps only the first one's thinking (at the start).
            merged = [b for b in blocks if b["type"] not in THINKING_TYPES]
            turns[-1] = (converted.role, [*turns[-1][1], *merged])
        else:
            # A user's own message after a settled assistant turn starts an independent part.
            if message.role == "user" and turns and _settled_end(turns[-1]):
                cuts.append((index, len(turns), len(system)))
            turns.append((converted.role, list(blocks)))
    paired = _paired(turns)
    alive = {id(b) for _, blocks in paired for b in blocks} | {id(b) for b in system}
    marks = _place_marks(request, system, emitted, _Alive(alive, prefix.alive))
    if prefix.alive and any(key in prefix.alive for key in marks):
        return _plan(request)  # a mark inside the prefix: convert it all, marks and all
    return _Plan(head=_head(request, [_marked(b, marks) for b in system]), prefix=prefix,
                 turns=paired, marks=marks, texts=texts, cuts=cuts, merged=turns,
                 system=system, emitted=emitted)


class _Alive:
    """Membership in either of two sets of block ids (the prefix's is not copied)."""

    def __init__(self, *sets: AbstractSet[int]) -> None:
        self._sets = sets

    def __contains__(self, key: object) -> bool:
        return any(key in s for s in self._sets)


def _thinking(request: ModelRequest) -> tuple[dict | None, int]:
    max_tokens = request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS
    return thinking_config(request, max_tokens, DEFAULT_MAX_TOKENS)


def _head(request: ModelRequest, system: list[dict]) -> dict:
    thinking, max_tokens = _thinking(request)
    out: dict = {"model": request.model, "max_tokens": max_tokens}
    if system:
        out["system"] = system
    if request.tools and (choice := _tool_choice(request.tool_choice)) is not None:
        out["tool_choice"] = choice
    if thinking is not None:
        out["thinking"] = thinking
    if request.stream:
        out["stream"] = True
    return out


def _marked(block: dict, marks: dict[int, dict]) -> dict:
    mark = marks.get(id(block))
    return block if mark is None else {**block, "cache_control": dict(mark)}


def to_anthropic(request: ModelRequest) -> dict:
    """The ``messages.create`` keyword arguments (the JSON body, as a dict) for ``request``."""
    plan = _PREFIXES.plan(request)
    out = dict(plan.head)
    if request.tools:
        out["tools"] = [json.loads(_tool_json(t)) for t in request.tools]
    out["messages"] = [{"role": role, "content": _content(blocks, plan.marks)}
                       for role, blocks in (*plan.prefix.turns, *plan.turns)]
    return out


def _content(blocks: list[dict], marks: dict[int, dict]) -> str | list[dict]:
    collapsed = _collapsed(blocks, marks)
    return collapsed if isinstance(collapsed, str) else [_marked(b, marks) for b in collapsed]


def request_body(request: ModelRequest) -> bytes:
    """:func:`to_anthropic` as JSON bytes, joined from the cached text of each block (and of
    the history's settled prefix as a whole)."""
    plan = _PREFIXES.plan(request)
    messages = _turns_json(plan.turns, plan.marks, plan.texts)
    if plan.prefix.json:
        messages.insert(0, plan.prefix.json)
    tools = (',"tools":[' + ",".join(_tool_json(t) for t in request.tools) + "]"
             if request.tools else "")
    return (canonical_json(plan.head)[:-1] + tools + ',"messages":[' + ",".join(messages)
            + "]}").encode()


def _turns_json(turns: Sequence[tuple[str, list[dict]]], marks: dict[int, dict],
                texts: Mapping[int, tuple[str, str | None]]) -> list[str]:
    def block_json(block: dict) -> str:
        known = texts.get(id(block))
        if known is None or id(block) in marks:
            return canonical_json(_marked(block, marks))
        return known[0]

    messages = []
    for role, blocks in turns:
        content = _collapsed(blocks, marks)
        if isinstance(content, str):
            known = texts.get(id(blocks[0]))
            text = known[1] if known and known[1] else json.dumps(content, ensure_ascii=False)
        else:
            text = "[" + ",".join(block_json(b) for b in blocks) + "]"
        messages.append(f'{{"role":"{role}","content":{text}}}')
    return messages


# ---- the settled prefix of a history ------------------------------------------------------

PREFIX_STEP = 16  # messages a prefix grows by at least, so that extending it is rare
PREFIX_SESSIONS = 8  # histories (by their first message) whose prefix is kept


class _Prefixes:
    """The settled prefix of each of the last few histories, keyed by their first message.

    History is append-only within a session, so a request usually starts with the messages
    of the previous one: only what follows the prefix is converted again. Whether it does is
    checked by identity (a compression or a new history simply misses), and a prefix ends
    before the first cache mark, so marks never fall on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Keyed by the first message, whose thinking blocks are sent back, and whether
        # reasoning goes back at all (as text where no block can carry it).
        self._entries: OrderedDict[tuple[int, str | None, bool], _Prefix] = OrderedDict()

    def plan(self, request: ModelRequest) -> _Plan:
        messages = request.messages
        if not messages:
            return _plan(request)
        key = (id(messages[0]), replay_provider(request, _thinking(request)[0]),
               request.replay_reasoning)
        with self._lock:
            prefix = self._entries.get(key, _NO_PREFIX)
        size = len(prefix.messages)
        # The prefix holds while the request starts with its very messages and (a new tail
        # may differ from the one it was cut from) goes on with a user's own message.
        if size and not (len(messages) >= size
                         and (len(messages) == size or messages[size].role == "user")
                         and all(map(operator.is_, messages[:size], prefix.messages))):
            prefix = _NO_PREFIX
        plan = _plan(request, prefix)
        longer = self._extended(request, plan)
        if longer is not None:
            with self._lock:
                self._entries[key] = longer
                self._entries.move_to_end(key)
                while len(self._entries) > PREFIX_SESSIONS:
                    self._entries.popitem(last=False)
        return plan

    @staticmethod
    def _extended(request: ModelRequest, plan: _Plan) -> _Prefix | None:
        """A longer prefix, cut at the last cut before this request's first cache mark."""
        prefix, start = plan.prefix, len(plan.prefix.messages)
        first_mark = min((i for i in request.cache_marks if i >= 0),
                         default=len(request.messages))
        cut = next((c for c in reversed(plan.cuts) if c[0] <= first_mark), None)
        if cut is None or cut[0] - start < PREFIX_STEP:
            return None
        end, turn_count, system_end = cut
        # The cut follows a settled turn, so pairing the turns before it alone is the same.
        settled = _paired(plan.merged[:turn_count])
        texts = dict(prefix.texts)
        for blocks in plan.emitted[start:end]:
            texts.update((id(b), plan.texts[id(b)]) for b in blocks)
        added = ",".join(_turns_json(settled, {}, texts))
        return _Prefix(
            messages=tuple(request.messages[:end]),
            system=tuple(plan.system[1 if request.system_prompt else 0:system_end]),
            emitted=tuple(plan.emitted[:end]), texts=texts,
            alive=prefix.alive | {id(b) for _, blocks in settled for b in blocks},
            turns=(*prefix.turns, *settled),
            json=f"{prefix.json},{added}" if prefix.json and added else prefix.json or added)


_PREFIXES = _Prefixes()


def _collapsed(blocks: list[dict], marks: dict[int, dict]) -> str | list[dict]:
    only = blocks[0] if len(blocks) == 1 else None
    if only is not None and only["type"] == "text" and id(only) not in marks:
        return only["text"]
    return blocks
