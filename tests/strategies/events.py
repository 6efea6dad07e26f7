"""Hypothesis strategies for every event kind and the plain data nested in events.

Text mixes arbitrary unicode (without lone surrogates, which UTF-8 logs cannot hold) with
JSON-ish strings, so codecs and redaction see quotes, braces, escapes and non-ASCII.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import attrs
from hypothesis import strategies as st

from stages.log import events as ev
from stages.log.content_parts import MEDIA_TYPES, ImagePart, TextPart
from stages.log.messages import Message, ToolCall, canonical_json
from stages.log.output_spec import OUTPUT_MODES, OutputSpec
from stages.log.pause_events import PendingApproval
from stages.log.reasoning_parts import EFFORTS, ReasoningPart
from stages.log.tokens import ReplyTokens
from stages.log.tool_specs import ToolOutcome, ToolSpec

__all__ = [
    "EVENT_STRATEGIES",
    "any_event",
    "events_of_kind",
    "identifiers",
    "image_parts",
    "json_objects",
    "json_values",
    "messages",
    "session_settings",
    "texts",
    "tool_calls",
    "tool_outcomes",
    "tool_specs",
    "uncovered_fields",
    "usages",
]

_CHARS = st.characters(exclude_categories=("Cs",))
"""Every code point except lone surrogates."""

_PLAIN = st.text(_CHARS, max_size=40)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | _PLAIN,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(_PLAIN, children, max_size=4),
    max_leaves=12,
)
"""Any JSON value (no NaN or infinities: JSON has none)."""

json_objects = st.dictionaries(_PLAIN, json_values, max_size=5)

_JSONISH = st.one_of(
    json_values.map(json.dumps),
    json_values.map(canonical_json),
    st.sampled_from(['{"a":', '{"x": 1}}', "[1, 2", '"unterminated', "\\u00e9", "{}", "null",
                     '{"api_key": "sk-abcdefghijklmnop"}', "\u2028\u2029", "\x00\x1f"]),
)

texts = st.one_of(_PLAIN, _JSONISH)
"""Free text: unicode, control characters, or JSON-ish snippets."""

identifiers = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=24)
"""Ids and names as providers send them (printable ASCII)."""

small_ints = st.integers(min_value=0, max_value=2**31)
finite_floats = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
timestamps = st.datetimes(timezones=st.just(dt.UTC)).map(
    lambda d: d.isoformat(timespec="microseconds"))


_UNCOVERED: set[str] = set()


def _by_type() -> dict[object, st.SearchStrategy]:
    return {
        str: texts, int: small_ints, float: finite_floats, bool: st.booleans(),
        str | None: st.none() | texts, int | None: st.none() | small_ints,
        float | None: st.none() | finite_floats, bool | None: st.none() | st.booleans(),
        tuple[str, ...]: st.lists(identifiers, max_size=3).map(tuple),
        tuple[tuple[str, str], ...]: st.lists(st.tuples(identifiers, texts),
                                              max_size=3).map(tuple),
    }


def _full(cls: type, **given: st.SearchStrategy) -> st.SearchStrategy:
    """``st.builds(cls, **given)``, with every other field generated from its type, so that
    fields added later are exercised too (``uncovered_fields`` names any that cannot be)."""
    hints = attrs.resolve_types(cls)
    by_type = _by_type()
    for field in attrs.fields(hints):
        if not field.init or field.name in given:
            continue
        if field.type in by_type:
            given[field.name] = by_type[field.type]
        else:
            _UNCOVERED.add(f"{cls.__name__}.{field.name}: {field.type}")
    return st.builds(cls, **given)


def uncovered_fields() -> list[str]:
    """Fields of event classes (or nested classes) the strategies leave at their default."""
    return sorted(_UNCOVERED)


def tool_calls(names: st.SearchStrategy[str] = identifiers,
               arguments: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[ToolCall]:
    args = arguments if arguments is not None else st.one_of(
        json_objects.map(canonical_json), texts)
    return _full(ToolCall, id=identifiers, name=names, arguments=args)


reasoning_efforts = st.none() | st.sampled_from(EFFORTS)
reasoning_budgets = st.none() | st.integers(1, 10**6)
_REASONING = {"reasoning_effort": reasoning_efforts, "reasoning_budget": reasoning_budgets}

reasoning_parts = st.one_of(
    _full(ReasoningPart, type=st.just("thinking"), api_mode=st.just("anthropic_messages"),
          provider=identifiers, text=texts, signature=st.none() | identifiers, data=st.none(),
          summary=st.just(()), item_id=st.none()),
    _full(ReasoningPart, type=st.just("redacted_thinking"),
          api_mode=st.just("anthropic_messages"), provider=identifiers, text=st.just(""),
          signature=st.none(), data=identifiers, summary=st.just(()), item_id=st.none()),
    _full(ReasoningPart, type=st.just("reasoning"), api_mode=st.just("codex_responses"),
          provider=identifiers, text=st.just(""), signature=st.none(), data=identifiers,
          summary=st.lists(texts, max_size=2).map(tuple), item_id=st.none() | identifiers))
"""Provider-issued reasoning as each API issues it."""


_sha256 = st.binary(min_size=1, max_size=8).map(lambda b: hashlib.sha256(b).hexdigest())
_sizes = st.none() | st.integers(1, 4096)
image_parts = st.one_of(
    _full(ImagePart, sha256=_sha256, media_type=st.sampled_from(MEDIA_TYPES), url=st.none(),
          size=st.integers(1, 10**7), width=_sizes, height=_sizes,
          detail=st.none() | st.sampled_from(("auto", "low", "high"))),
    st.builds(ImagePart, url=st.sampled_from(("https://example.com/a.png",
                                              "http://h/x.jpg?sig=1"))))
"""Images as events hold them: stored by hash, or by URL."""

content_parts = st.lists(_full(TextPart, text=texts) | image_parts, min_size=1,
                         max_size=3).map(tuple)


def messages(roles: st.SearchStrategy[str] = st.sampled_from(("system", "user", "assistant",
                                                                   "tool")),
             *, parts: bool = False) -> st.SearchStrategy[Message]:
    """Messages of ``roles``; with ``parts``, user messages may hold text and image parts (as
    logged: stored images by reference, which only the send path turns into bytes)."""
    def build(role: str) -> st.SearchStrategy[Message]:
        calls = (st.lists(tool_calls(), max_size=3).map(tuple) if role == "assistant"
                 else st.just(()))
        return _full(
            Message, role=st.just(role), content=st.none() | texts | (
                content_parts if parts and role == "user" else st.nothing()), tool_calls=calls,
            tool_call_id=identifiers if role == "tool" else st.none() | identifiers,
            name=st.none() | identifiers,
            reasoning=st.none() | texts if role == "assistant" else st.none(),
            reasoning_parts=(st.lists(reasoning_parts, max_size=2).map(tuple)
                             if role == "assistant" else st.just(())))
    return roles.flatmap(build)


tool_specs = _full(
    ToolSpec, name=identifiers, description=texts,
    parameters=json_objects.map(canonical_json),
    interactive=st.booleans(), read_only=st.booleans())

tool_outcomes = _full(
    ToolOutcome, call_id=identifiers, name=identifiers, content=texts, ok=st.booleans(),
    error=st.none() | texts, duration_ms=finite_floats)

usages = _full(
    ev.Usage, input_tokens=small_ints, output_tokens=small_ints, cache_read_tokens=small_ints,
    cache_write_tokens=small_ints, reasoning_tokens=small_ints,
    reasoning_in_output=st.booleans())

provider_entries = _full(
    ev.ProviderEntry, provider=identifiers, model=identifiers, base_url=st.none() | texts,
    api_mode=st.sampled_from(ev.API_MODES), context_length=st.none() | st.integers(1, 10**7),
    **_REASONING)

session_settings = _full(
    ev.SessionSettings, fallback_providers=st.lists(provider_entries, max_size=2).map(tuple),
    cheap_model=st.none() | provider_entries,
    model=identifiers, provider=identifiers, base_url=st.none() | texts,
    api_mode=st.sampled_from(ev.API_MODES),
    max_turns=st.integers(1, 1000), max_tokens=st.none() | st.integers(1, 10**6),
    context_length=st.none() | st.integers(1, 10**7), stream=st.booleans(),
    identity=st.none() | texts,
    preflight_threshold=st.floats(0, 1, exclude_min=True, allow_nan=False),
    between_turns_threshold=st.floats(0, 1, exclude_min=True, allow_nan=False),
    compression_enabled=st.booleans(), protect_last_n=st.integers(0, 1000),
    credential_strategy=st.sampled_from(ev.CREDENTIAL_STRATEGIES),
    cache_ttl=st.sampled_from(ev.CACHE_TTLS), rules=st.integers(1, ev.RULES),
    platform=st.sampled_from(ev.PLATFORMS),
    system_message_mode=st.sampled_from(ev.SYSTEM_MESSAGE_MODES),
    memory_provider=st.none() | identifiers, sandbox=st.sampled_from(ev.SANDBOX_MODES),
    output_retries=st.integers(0, 10), output_mode=st.sampled_from(OUTPUT_MODES),
    record_tokens=st.booleans(), tokenizer=st.none() | identifiers, **_REASONING)

@st.composite
def _reply_tokens(draw: st.DrawFn) -> ReplyTokens:
    """A call's tokens: ids, pieces and logprobs of one length (ids may be unnamed)."""
    size = draw(st.integers(0, 5))
    ids = st.lists(st.integers(0, 200_000), min_size=size, max_size=size).map(tuple)
    return ReplyTokens(
        pieces=tuple(draw(st.lists(texts, min_size=size, max_size=size))),
        logprobs=tuple(draw(st.lists(st.floats(-50, 0), min_size=size, max_size=size))),
        ids=draw(st.none() | ids), prompt_ids=draw(st.none() | st.lists(
            st.integers(0, 200_000), max_size=8).map(tuple)),
        prompt_source=draw(st.none() | st.sampled_from(("llama.cpp", "vllm"))),
        withheld=draw(st.none() | st.just("redacted")))


output_specs = _full(
    OutputSpec, name=identifiers, schema=json_objects.map(canonical_json),
    strict=st.booleans(), description=st.none() | texts, wrapped=st.booleans())

_named_texts = st.lists(st.tuples(identifiers, texts), max_size=3).map(tuple)
_names = st.lists(identifiers, max_size=3).map(tuple)
skill_cards = _full(
    ev.SkillCard, name=identifiers, description=texts, category=identifiers, platforms=_names,
    requires_tools=_names, fallback_for_tools=_names, path=texts)

_opt_text = st.none() | texts
_indices = st.lists(small_ints, max_size=4).map(tuple)
_window_probes = _full(ev.ContextWindowProbed, provider=identifiers, model=identifiers,
                       tokens=st.integers(1, 10**7))

EVENT_STRATEGIES: dict[str, st.SearchStrategy] = {
    ev.SessionStarted.kind: _full(
        ev.SessionStarted, session_id=identifiers, started_at=timestamps,
        settings=session_settings, parent_session_id=st.none() | identifiers),
    ev.SessionResumed.kind: _full(
        ev.SessionResumed, resumed_at=timestamps, settings=session_settings),
    ev.SessionForked.kind: _full(
        ev.SessionForked, origin_session_id=identifiers, origin_seq=small_ints,
        forked_at=timestamps, settings=session_settings),
    ev.ToolsDeclared.kind: _full(
        ev.ToolsDeclared, tools=st.lists(tool_specs, max_size=3).map(tuple)),
    ev.HistoryLoaded.kind: _full(
        ev.HistoryLoaded, messages=st.lists(messages(parts=True), max_size=4).map(tuple)),
    ev.TurnStarted.kind: _full(
        ev.TurnStarted, turn_id=identifiers, task_id=identifiers, started_at=timestamps,
        user_message=texts, system_message=_opt_text, output=st.none() | output_specs,
        **_REASONING, client_tools=st.lists(tool_specs, max_size=2).map(tuple),
        tool_results=st.lists(messages(st.just("tool")), max_size=2).map(tuple),
        images=st.lists(image_parts, max_size=2).map(tuple)),
    ev.ModelReplied.kind: _full(
        ev.ModelReplied, message=messages(st.just("assistant")),
        finish_reason=st.sampled_from(("stop", "tool_calls", "length", "content_filter")),
        usage=usages, model=identifiers, latency_ms=finite_floats, streamed=st.booleans(),
        tokens=st.none() | _reply_tokens()),
    ev.ModelFailed.kind: _full(
        ev.ModelFailed, error_type=identifiers, message=texts,
        status=st.none() | st.integers(100, 599), latency_ms=finite_floats),
    ev.ToolRan.kind: _full(ev.ToolRan, outcome=tool_outcomes),
    ev.TurnAborted.kind: _full(ev.TurnAborted, error=texts),
    ev.ClockRead.kind: _full(ev.ClockRead, epoch=finite_floats),
    ev.Waited.kind: _full(ev.Waited, seconds=finite_floats, jitter=finite_floats),
    ev.CredentialRefreshed.kind: _full(ev.CredentialRefreshed, credential_id=identifiers,
                                       refreshed=st.booleans()),
    ev.CredentialSelected.kind: _full(ev.CredentialSelected, provider_index=small_ints,
                                      credential_id=identifiers),
    ev.RecoveryDecided.kind: _full(
        ev.RecoveryDecided, reason=identifiers, detail=texts, at=finite_floats,
        action=st.sampled_from(("retry", "refresh", "rotate", "fallback", "fail", "compress"))),
    ev.ContinuationRequested.kind: _full(
        ev.ContinuationRequested, prompt=texts,
        why=st.sampled_from(("incomplete", "length", "empty"))),
    ev.Interrupted.kind: _full(
        ev.Interrupted, during=st.sampled_from(("between_steps", "model_call", "tools")),
        message=_opt_text),
    ev.SystemPromptSet.kind: _full(ev.SystemPromptSet, text=texts),
    ev.ContextPressure.kind: _full(
        ev.ContextPressure, estimated_tokens=small_ints, threshold_tokens=small_ints),
    ev.BudgetExhausted.kind: _full(
        ev.BudgetExhausted, api_calls=small_ints, max_turns=small_ints, prompt=texts),
    ev.ModelRequested.kind: _full(
        ev.ModelRequested, call_index=small_ints,
        purpose=st.sampled_from(("step", "budget_summary")), model=identifiers,
        provider=identifiers, message_count=small_ints, tool_count=small_ints,
        estimated_tokens=small_ints),
    ev.ToolCallRejected.kind: _full(
        ev.ToolCallRejected, call=tool_calls(),
        reason=st.sampled_from(("unknown_tool", "invalid_arguments", "interrupted")),
        content=texts),
    ev.ToolsPlanned.kind: _full(
        ev.ToolsPlanned, call_ids=st.lists(identifiers, max_size=4).map(tuple),
        concurrent=st.booleans()),
    ev.TurnFinished.kind: _full(
        ev.TurnFinished, exit_reason=identifiers, final_response=_opt_text,
        completed=st.booleans(), failed=st.booleans(), interrupted=st.booleans(),
        error=_opt_text, note=_opt_text),
    ev.ToolCallRepaired.kind: _full(
        ev.ToolCallRepaired, call_id=identifiers, name=identifiers,
        arguments=json_objects.map(canonical_json),
        repairs=st.lists(st.sampled_from(("name", "arguments_unwrapped", "trailing_commas")),
                         min_size=1, max_size=2).map(tuple)),
    ev.RouteChosen.kind: _full(
        ev.RouteChosen, route=st.sampled_from(("cheap", "primary")), reason=texts,
        model=identifiers),
    ev.ApprovalAnswered.kind: _full(
        ev.ApprovalAnswered, call_id=identifiers, pattern=identifiers,
        choice=st.sampled_from(ev.APPROVAL_CHOICES),
        source=st.sampled_from(("callback", "allowlist", "default", "timeout", "error")),
        reason=_opt_text),
    ev.PromptInputsRead.kind: _full(
        ev.PromptInputsRead, cwd=st.none() | texts, identity=_opt_text,
        context_files=_named_texts, memory=_named_texts,
        skills=st.lists(skill_cards, max_size=2).map(tuple)),
    ev.HintsRead.kind: _full(ev.HintsRead, dirs=_names, files=_named_texts),
    ev.ContextNotice.kind: _full(ev.ContextNotice, source=identifiers, name=texts, detail=texts),
    ev.HintAttached.kind: _full(ev.HintAttached, call_id=identifiers, text=texts),
    ev.MemoryPrefetched.kind: _full(ev.MemoryPrefetched, results=_named_texts, failed=_names),
    ev.ContextWindowProbed.kind: _window_probes,
    ev.CompressionPlanned.kind: _full(
        ev.CompressionPlanned, pruned=_indices, cut=_indices, at=finite_floats),
    ev.ContextSummarised.kind: _full(ev.ContextSummarised, usage=usages, text=texts),
    ev.SummaryFailed.kind: _full(ev.SummaryFailed),
    ev.ContextCompressed.kind: _full(ev.ContextCompressed),
    ev.SessionSplit.kind: _full(ev.SessionSplit, child_session_id=identifiers),
    ev.ContextInherited.kind: _full(
        ev.ContextInherited, messages=st.lists(messages(), max_size=4).map(tuple),
        windows=st.lists(_window_probes, max_size=2).map(tuple)),
    ev.CompressionRequested.kind: _full(ev.CompressionRequested),
    ev.Checkpointed.kind: _full(ev.Checkpointed, turn=small_ints, tree=texts,
                                commit=st.none() | identifiers, error=_opt_text),
    ev.TreeRestored.kind: _full(ev.TreeRestored, turn=st.none() | small_ints,
                                tree=_opt_text, commit=st.none() | identifiers),
    ev.SandboxProbed.kind: _full(ev.SandboxProbed, mode=st.sampled_from(ev.SANDBOX_MODES)),
    ev.OutputChecked.kind: _full(ev.OutputChecked, valid=st.booleans(),
                                 output=st.none() | json_objects.map(canonical_json),
                                 errors=_opt_text),
    ev.ApprovalsPending.kind: _full(ev.ApprovalsPending, calls=st.lists(_full(
        PendingApproval, call_id=identifiers, tool=identifiers, pattern=identifiers),
        min_size=1, max_size=3).map(tuple)),
    ev.ApprovalsDecided.kind: _full(ev.ApprovalsDecided, answers=st.lists(_full(
        ev.ApprovalAnswered, call_id=identifiers, pattern=identifiers,
        choice=st.sampled_from(ev.APPROVAL_CHOICES), source=st.just("decision"),
        reason=_opt_text), min_size=1, max_size=3).map(tuple)),
    ev.Steered.kind: _full(ev.Steered),
}


def events_of_kind(kind: str) -> st.SearchStrategy[ev.Event]:
    return EVENT_STRATEGIES[kind]


any_event: st.SearchStrategy[ev.Event] = st.one_of(*EVENT_STRATEGIES.values())
