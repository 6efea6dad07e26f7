"""Pure conversion between mibyan's canonical (OpenAI-format) messages and Anthropic Messages.

:func:`to_anthropic` turns a canonical :class:`ModelRequest` into the ``messages.create``
keyword arguments, and :func:`request_body` into the same as JSON bytes, from each message's
blocks converted once and cached as JSON text (as the OpenAI adapters do): ``system`` text
blocks, ``tool_use`` blocks (``{}`` for arguments that are not a JSON object), each run of tool
results as ``tool_result`` blocks in ONE user turn (with any user text that follows), orphan results
dropped, a stub error result for each unanswered ``tool_use``, same-role messages merged, and
``cache_control`` on the last block each marked canonical message became.

Reasoning on canonical assistant messages is **not** sent back: Anthropic accepts thinking
blocks only with the signature it issued, and the canonical history keeps none. Hence
``reasoning_effort`` enables thinking only when a turn starts (last message from the user):
mid tool loop the previous assistant message would lack its signed thinking block.

:func:`message_from`, :func:`usage_from` and :func:`finish_reason` read a reply back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

import attrs

from effects.wire import WireCache, arguments_object
from stages.decision import ModelRequest
from stages.errors import UsageError
from stages.events import Usage
from stages.messages import Message, ToolCall, canonical_arguments, canonical_json
from stages.tools import ToolSpec

DEFAULT_MAX_TOKENS = 4096
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                "model_context_window_exceeded": "length", "tool_use": "tool_calls",
                "refusal": "content_filter", "pause_turn": "incomplete"}
THINKING_BUDGET = {"minimal": 1024, "low": 4000, "medium": 8000, "high": 16000, "xhigh": 32000}
_BAD_ID = re.compile(r"[^a-zA-Z0-9_-]")

# ---- canonical history -> Anthropic ------------------------------------------------------


def _tool_id(raw: str | None) -> str:
    return _BAD_ID.sub("_", raw or "") or "tool_0"


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def _blocks(message: Message) -> tuple[str, list[dict]]:
    """The Anthropic role and content blocks of one canonical message."""
    if message.role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": _tool_id(message.tool_call_id),
                         "content": message.content or "(no output)"}]
    has_text = bool(message.content and message.content.strip())
    if message.role == "user":
        return "user", [_text(message.content or "" if has_text else "(empty message)")]
    blocks = [_text(message.content or "")] if has_text else []
    blocks += [{"type": "tool_use", "id": _tool_id(c.id), "name": c.name,
                "input": arguments_object(c.arguments)} for c in message.tool_calls]
    return "assistant", blocks or [_text("(empty)")]


def _merged(turns: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    out: list[tuple[str, list[dict]]] = []
    for role, blocks in turns:
        if not blocks:
            continue
        if out and out[-1][0] == role:
            out[-1] = (role, out[-1][1] + blocks)
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
                 alive: set[int]) -> dict[int, dict]:
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


def _thinking(request: ModelRequest, max_tokens: int) -> tuple[dict | None, int]:
    effort = request.reasoning_effort
    if effort is None or effort == "none":
        return None, max_tokens
    if effort not in THINKING_BUDGET:
        raise UsageError(f"reasoning_effort {effort!r} is not one of none, "
                         + ", ".join(THINKING_BUDGET))
    last = next((m.role for m in reversed(request.messages) if m.role != "system"), None)
    if last != "user" or request.tool_choice not in (None, "auto", "none"):
        return None, max_tokens
    budget = THINKING_BUDGET[effort]
    if request.max_tokens is None:
        return {"type": "enabled", "budget_tokens": budget}, budget + DEFAULT_MAX_TOKENS
    budget = min(budget, max_tokens - 1)
    if budget < 1024:
        return None, max_tokens
    return {"type": "enabled", "budget_tokens": budget}, max_tokens


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


def _convert(message: Message) -> _Converted:
    if message.role == "system":
        role, blocks = None, [_text(message.content)] if message.content else []
    else:
        role, blocks = _blocks(message)
    texts = tuple((canonical_json(b), json.dumps(b["text"], ensure_ascii=False)
                   if b["type"] == "text" else None) for b in blocks)
    return _Converted(role=role, blocks=tuple(blocks), texts=texts,
                      by_id=tuple(zip(map(id, blocks), texts, strict=True)))


_converted: WireCache[Message, _Converted] = WireCache(_convert)
_tool_json: WireCache[ToolSpec, str] = WireCache(lambda t: canonical_json({
    "name": t.name, "description": t.description, "input_schema": json.loads(t.parameters)}))


@attrs.frozen
class _Plan:
    """A request in Anthropic's terms, before it is written as a dict or as JSON text."""

    head: dict  # every field but "messages" and "tools", marks on system blocks applied
    turns: list[tuple[str, list[dict]]]
    marks: dict[int, dict]
    texts: dict[int, tuple[str, str | None]]


def _plan(request: ModelRequest) -> _Plan:
    system = [_text(request.system_prompt)] if request.system_prompt else []
    turns: list[tuple[str, list[dict]]] = []
    emitted: list[tuple[dict, ...]] = []
    texts: dict[int, tuple[str, str | None]] = {}
    for message in request.messages:
        converted = _converted(message)
        blocks = converted.blocks
        if blocks and id(blocks[0]) in texts:  # the same message again: marks go by identity
            blocks = tuple(dict(b) for b in blocks)
            texts.update(zip(map(id, blocks), converted.texts, strict=True))
        else:
            texts.update(converted.by_id)
        emitted.append(blocks)
        if converted.role is None:
            system.extend(blocks)
        elif turns and turns[-1][0] == converted.role:
            turns[-1] = (converted.role, [*turns[-1][1], *blocks])
        else:
            turns.append((converted.role, list(blocks)))
    turns = _paired(turns)
    alive = {id(b) for _, blocks in turns for b in blocks} | {id(b) for b in system}
    marks = _place_marks(request, system, emitted, alive)
    return _Plan(head=_head(request, [_marked(b, marks) for b in system]), turns=turns,
                 marks=marks, texts=texts)


def _head(request: ModelRequest, system: list[dict]) -> dict:
    max_tokens = request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS
    thinking, max_tokens = _thinking(request, max_tokens)
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
    plan = _plan(request)
    out = dict(plan.head)
    if request.tools:
        out["tools"] = [json.loads(_tool_json(t)) for t in request.tools]
    out["messages"] = [{"role": role, "content": _content(blocks, plan.marks)}
                       for role, blocks in plan.turns]
    return out


def _content(blocks: list[dict], marks: dict[int, dict]) -> str | list[dict]:
    collapsed = _collapsed(blocks, marks)
    return collapsed if isinstance(collapsed, str) else [_marked(b, marks) for b in collapsed]


def request_body(request: ModelRequest) -> bytes:
    """:func:`to_anthropic` as JSON bytes, joined from the cached text of each block."""
    plan = _plan(request)

    def block_json(block: dict) -> str:
        known = plan.texts.get(id(block))
        if known is None or id(block) in plan.marks:
            return canonical_json(_marked(block, plan.marks))
        return known[0]

    messages = []
    for role, blocks in plan.turns:
        content = _collapsed(blocks, plan.marks)
        if isinstance(content, str):
            known = plan.texts.get(id(blocks[0]))
            text = known[1] if known and known[1] else json.dumps(content, ensure_ascii=False)
        else:
            text = "[" + ",".join(block_json(b) for b in blocks) + "]"
        messages.append(f'{{"role":"{role}","content":{text}}}')
    tools = (',"tools":[' + ",".join(_tool_json(t) for t in request.tools) + "]"
             if request.tools else "")
    return (canonical_json(plan.head)[:-1] + tools + ',"messages":[' + ",".join(messages)
            + "]}").encode()


def _collapsed(blocks: list[dict], marks: dict[int, dict]) -> str | list[dict]:
    only = blocks[0] if len(blocks) == 1 else None
    if only is not None and only["type"] == "text" and id(only) not in marks:
        return only["text"]
    return blocks


# ---- Anthropic reply -> canonical --------------------------------------------------------


def usage_from(raw: Mapping | None) -> Usage:
    """Anthropic's ``input_tokens`` already exclude cache reads and writes. Thinking tokens
    are counted inside ``output_tokens`` and not reported apart."""
    raw = raw or {}
    return Usage(input_tokens=raw.get("input_tokens") or 0,
                 output_tokens=raw.get("output_tokens") or 0,
                 cache_read_tokens=raw.get("cache_read_input_tokens") or 0,
                 cache_write_tokens=raw.get("cache_creation_input_tokens") or 0)


def finish_reason(stop_reason: str | None) -> str:
    return STOP_REASONS.get(stop_reason or "end_turn", "stop")


def message_from(blocks: Sequence[Mapping]) -> Message:
    """A canonical assistant message from Anthropic content blocks (``tool_use`` inputs as
    dicts, or as JSON text under ``arguments`` when assembled from a stream)."""
    text: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            text.append(block.get("text") or "")
        elif kind == "thinking":
            thoughts.append(block.get("thinking") or "")
        elif kind == "tool_use":
            arguments = block.get("arguments")
            arguments = (canonical_json(block.get("input") or {}) if arguments is None
                         else canonical_arguments(arguments))
            calls.append(ToolCall(id=block.get("id") or f"toolu_{len(calls)}",
                                  name=block.get("name") or "", arguments=arguments))
    content = "".join(text)
    return Message(role="assistant", content=content or (None if calls else ""),
                   tool_calls=tuple(calls),
                   reasoning="\n\n".join(t for t in thoughts if t) or None)
