"""Request stage: build the model request from the state (shared, not copied) and record what
is sent. Under rules 2 the record carries the request's digest, so a replay catches any change
in what is sent, not only in the counts."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from json.encoder import encode_basestring

import attrs

from stages.context.notes import system_prompt
from stages.context.preflight import estimate_tokens
from stages.decision import CallModel, Decision, ModelRequest
from stages.log.events import LOCAL_PROVIDER, ModelRequested, ProviderEntry, SessionSettings
from stages.log.messages import Message, canonical_json
from stages.log.output_spec import FINAL_TOOL, OutputSpec, final_tool
from stages.log.state import State
from stages.log.tool_specs import ToolSpec
from stages.prompt.memory import recall_block, with_recall
from stages.recovery.reasoning import reasoning_digest_fields, reasoning_for
from stages.turn.step import LENGTH_PROMPTS, cut_parts
from stages.turn.token_note import token_note


def request_digest(request: ModelRequest, history_digest: str) -> str:
    """SHA-256 over everything a request sends; the history enters through its running digest
    (kept by the fold), so the cost does not grow with the conversation."""
    tail: list[object] = [request.tool_choice, request.max_tokens, request.stream,
                          list(request.cache_marks), request.cache_ttl, request.reasoning_effort]
    extra = reasoning_digest_fields(request)
    if extra:  # only when used: digests of requests that do not use them stay as they were
        tail.append(extra)
    if request.output is not None:  # the same: only a turn with an output type sends it
        tail.append(attrs.asdict(request.output))
    if request.logprobs:  # the same: a session recording no tokens digests as before
        tail.append({"logprobs": True})
    summary = digest_text(
        (request.api_mode, request.provider, request.model, request.base_url, request.purpose,
         request.system_prompt, history_digest, len(request.messages)),
        tuple([tool.wire for tool in request.tools]) if request.tools else (), tail)
    return hashlib.sha256(summary.encode()).hexdigest()


def digest_text(head: Sequence[object], tool_wires: tuple[str, ...],
                tail: Sequence[object]) -> str:
    """``canonical_json([*head, list(tool_wires), *tail])``, written item by item: most items
    are short text, for which the encoder's set-up would cost more than the encoding."""
    return "[" + ",".join([*_items(head), _tools_json(tool_wires), *_items(tail)]) + "]"


def _items(values: Sequence[object]) -> list[str]:
    """Each value's JSON, the common kinds written inline: a call per item cost more than the
    encoding of a short one. A str subclass (an enum) goes to the encoder."""
    return ["null" if v is None else "true" if v is True else "false" if v is False
            else encode_basestring(v) if type(v) is str
            else int.__repr__(v) if type(v) is int else _item(v) for v in values]


@functools.lru_cache(maxsize=16)
def _tools_json(wires: tuple[str, ...]) -> str:
    # A session sends the same tools on every call: their schemas are escaped once.
    return canonical_json(list(wires))


def _item(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is str:  # exactly: a subclass (an enum) goes to the encoder
        return encode_basestring(value)
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is list:
        return "[" + ",".join(map(_item, value)) + "]"
    return canonical_json(value)


def prefilled(messages: Sequence[Message]) -> Sequence[Message]:
    """Rules 5, the embedded local model: a reply cut at the output limit goes on from its own
    text (llama.cpp continues a trailing assistant message) instead of from a user message
    asking it to, which a small model answers by starting over or by a new reply. The cut
    parts (none started over: that ends the continuations) become that one message."""
    if (len(messages) < 3 or messages[-1].role != "user"
            or messages[-1].content not in LENGTH_PROMPTS or messages[-2].role != "assistant"):
        return messages
    parts = cut_parts(messages, len(messages) - 2)
    first = len(messages) - 2 * len(parts)
    return [*messages[:first], Message(role="assistant", content="".join(parts))]


def output_request(output: OutputSpec | None, tools: tuple[ToolSpec, ...],
                   tool_choice: str | None, config: SessionSettings
                   ) -> tuple[tuple[ToolSpec, ...], str | None, OutputSpec | None]:
    """The tools, tool choice and structured output of a request whose turn has an output
    type: the provider's own structured output when the request has no tools (the model has
    nothing to do but answer), else the final-answer tool among the tools, one of which the
    model must call (``output_mode = "tool"``: always the tool)."""
    if output is None:
        return tools, tool_choice, None
    if not tools and config.output_mode == "auto":
        return tools, None, output
    return (*(t for t in tools if t.name != FINAL_TOOL), final_tool(output)), "required", None


def _streamed(config: SessionSettings, entry: ProviderEntry,
              tools: tuple[ToolSpec, ...]) -> bool:
    """A session recording tokens asks for whole replies where a stream would lose them:
    llama.cpp's server (the embedded model, or anyone's ``llama-server`` under any provider
    name) refuses logprobs on a streamed request that offers tools (400, "logprobs is not
    supported with tools + stream"), and the embedded model's streamed logprobs leave out the
    end-of-turn token the model wrote. Only ``record_tokens`` sessions, new with it, are
    affected: no recorded session decides differently, so no rules flag is needed."""
    return config.stream and not (config.record_tokens
                                  and (bool(tools) or entry.provider == LOCAL_PROVIDER))


def decide_request(state: State, *, config: SessionSettings,
                   cache_marks: tuple[int, ...] = ()) -> Decision:
    turn = state.turn
    if turn is None:
        raise ValueError("a model request needs an open turn")
    purpose = "budget_summary" if turn.budget_exhausted else "step"
    tools = () if turn.budget_exhausted else state.tools
    if not turn.budget_exhausted and turn.client_tools and config.rule_set.client_tools:
        tools = (*tools, *turn.client_tools)  # rules 8: the caller's own, after the session's
    tool_choice = config.tool_choice if tools else None
    output = None
    if turn.output is not None:
        tools, tool_choice, output = output_request(turn.output, tools, tool_choice, config)
    entry = turn.route or config.chain[turn.provider_index]
    # A routed call keeps the pooled key only when it goes to the same provider.
    credential_id = turn.credential_id if entry.provider == config.chain[
        turn.provider_index].provider else None
    recall = recall_block(state, config)
    history_digest = state.history_digest
    messages: Sequence[Message] = state.messages
    if recall is not None:  # rules 3: recalled memory rides on the user's message, when sent
        history_digest = hashlib.sha256((history_digest + recall).encode()).hexdigest()
        messages = with_recall(state, recall)
    if (config.rule_set.local_prefill and entry.provider == LOCAL_PROVIDER
            and entry.api_mode == "chat_completions"):
        messages = prefilled(messages)
    request = ModelRequest(model=entry.model, provider=entry.provider, api_mode=entry.api_mode,
                           purpose=purpose, system_prompt=system_prompt(state, config),
                           messages=messages, tools=tools, max_tokens=config.max_tokens,
                           stream=_streamed(config, entry, tools), base_url=entry.base_url,
                           credential_id=credential_id,
                           tool_choice=tool_choice, output=output,
                           cache_marks=cache_marks, cache_ttl=config.cache_ttl,
                           logprobs=config.record_tokens,
                           tokenizer=config.tokenizer if config.record_tokens else None,
                           **reasoning_for(state, config, entry))
    digest = request_digest(request, history_digest) if config.rule_set.request_digest else None
    event = ModelRequested(call_index=turn.api_calls, purpose=purpose, model=entry.model,
                           provider=entry.provider, message_count=len(state.messages),
                           tool_count=len(tools), estimated_tokens=estimate_tokens(state),
                           digest=digest)
    return Decision(events=(event, *token_note(state, config)), next=CallModel(request=request))
