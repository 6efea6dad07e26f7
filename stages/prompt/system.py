"""Prompt stage: the effective system prompt.

Under rules 3 the prompt is assembled from layers, joined by blank lines:

1. identity: ``SOUL.md`` from the home (scanned, capped), else the configured identity, else
   the default;
2. tool-use guidance (when tools are declared) and the platform hint (cli, gateway, cron, api);
3. the skills index (when skills exist and ``skill_view`` is declared);
4. the caller's system message (``system_message_mode="replace"``: it is the whole prompt);
5. the project context files;
6. the memory snapshot, fenced.

The inputs are read by an effect at session start (``PromptInputsRead``) and kept in the state,
so the prompt is byte-identical across turns and resumes (provider prompt caches hit); it is
read again only when ``prompt_stale`` is set (compression). The prompt is recorded only when
its text changes. Rules 1 and 2: the caller's system message wins, else identity + memory.
"""

from __future__ import annotations

import functools

import attrs

from stages.decision import NOTHING, Decision
from stages.log.events import (
    ContextNotice,
    Event,
    PromptInputsRead,
    SessionSettings,
    SystemPromptSet,
)
from stages.log.state import State
from stages.prompt.context_files import IDENTITY_MAX_CHARS, context_section, truncate
from stages.prompt.injection_wide import screened
from stages.prompt.memory import memory_block, sanitize, snapshot_block
from stages.prompt.skills import skills_index
from stages.prompt.untrusted import data_code, data_notice

DEFAULT_IDENTITY = (
    "You are mibyan, a capable assistant. Use the tools you are given when they help, "
    "and answer concisely."
)

PLATFORM_HINTS = {
    "cli": ("You are running in a terminal. Format answers for a terminal: plain text or light "
            "Markdown, no HTML."),
    "gateway": ("You are talking with the user through a messaging gateway. Keep answers short; "
                "rich Markdown may not render."),
    "cron": ("You are running as a scheduled job with nobody watching. Do the task and report "
             "what you did; do not ask questions, nobody will answer them."),
    "api": ("You are answering a request through an API. Answer in plain text unless the "
            "request asks for another format."),
}

TOOL_GUIDANCE = (
    "You have tools. Use them when they help: check facts you can check instead of guessing, "
    "read before you change things, and verify a change after making it. When a task is done, "
    "say what you did.")
MEMORY_GUIDANCE = (
    "You have persistent memory (the memory tool). Save durable facts worth knowing next time: "
    "the user's preferences, the project's conventions, lessons learned. Do not save secrets "
    "or one-off task details.")
SKILLS_GUIDANCE = (
    "Skills are instructions for recurring tasks; load one with skill_view when it matches.")


def needs_inputs(state: State, config: SessionSettings) -> bool:
    """Whether the turn must read the prompt inputs first: once a session (and after
    compression marked the prompt stale)."""
    return (config.rule_set.assembled_prompt and config.load_context
            and (state.prompt_inputs is None or state.prompt_stale))


Notice = tuple[str, str, str]  # source, name, detail


@functools.lru_cache(maxsize=16)
def _soul(identity: str, wide: bool) -> tuple[str, tuple[Notice, ...]]:
    text = truncate(sanitize(identity).strip(), IDENTITY_MAX_CHARS, "SOUL.md")
    text, findings = screened("SOUL.md", text, wide=wide)
    if findings:
        return text, (("identity", "SOUL.md", "blocked: " + ", ".join(findings)),)
    return text, ()


def _identity(inputs: PromptInputsRead | None, config: SessionSettings
              ) -> tuple[str, tuple[Notice, ...]]:
    if inputs is not None and inputs.identity and inputs.identity.strip():
        return _soul(inputs.identity, config.rule_set.wide_injection_scan)
    return config.identity or DEFAULT_IDENTITY, ()


@functools.lru_cache(maxsize=16)
def _file_layers(inputs: PromptInputsRead, platform: str, tools: frozenset[str], wide: bool
                 ) -> tuple[tuple[str | None, str | None, str | None], tuple[Notice, ...]]:
    """The skills index, the context section and the memory snapshot, with their notices.
    Scanning is the costly part of a prompt: a process does it once per set of inputs."""
    index, blocked = (skills_index(inputs.skills, platform=platform, tools=tools, wide=wide)
                      if "skill_view" in tools else (None, ()))
    context, context_notices = context_section(inputs.context_files, wide=wide)
    memory, memory_notices = snapshot_block(inputs.memory, wide=wide)
    notices = [("skill", name, "blocked: prompt injection in its card") for name in blocked]
    notices += [("context_file", n, d) for n, d in context_notices]
    notices += [("memory", n, d) for n, d in memory_notices]
    return (index, context, memory), tuple(notices)


def _guidance(state: State, config: SessionSettings) -> str:
    if not state.tools:  # no tool: the platform's hints alone
        return PLATFORM_HINTS[config.platform]
    names = {spec.name for spec in state.tools}
    parts = [TOOL_GUIDANCE]
    if "memory" in names:
        parts.append(MEMORY_GUIDANCE)
    if "skill_view" in names:
        parts.append(SKILLS_GUIDANCE)
    parts.append(PLATFORM_HINTS[config.platform])
    if config.rule_set.untrusted_marked:
        parts.append(data_notice(data_code(state)))
    return " ".join(parts)


def assemble(state: State, config: SessionSettings) -> tuple[str, tuple[ContextNotice, ...]]:
    """The rules-3 prompt and the notices about blocked or truncated content."""
    system_message = state.turn.system_message if state.turn is not None else None
    if system_message is not None and config.system_message_mode == "replace":
        return system_message, ()
    inputs = state.prompt_inputs if config.load_context else None
    identity, notices = _identity(inputs, config)
    parts: list[str | None] = [identity, _guidance(state, config)]
    if inputs is not None:
        tools = frozenset([spec.name for spec in state.tools])
        (index, context, memory), more = _file_layers(inputs, config.platform, tools,
                                                  config.rule_set.wide_injection_scan)
        notices += more
        parts += [index, system_message, context, memory]
    else:
        parts.append(system_message)
    text = "\n\n".join([p for p in parts if p])
    if not notices:
        return text, ()
    return text, tuple([ContextNotice(source=s, name=n, detail=d) for s, n, d in notices])


def build_system_prompt(state: State, prefetched: tuple[str, ...], *,
                        config: SessionSettings) -> str:
    if config.rule_set.assembled_prompt:
        return assemble(state, config)[0]
    if state.turn is not None and state.turn.system_message is not None:
        return state.turn.system_message
    parts = [config.identity or DEFAULT_IDENTITY]
    block = memory_block(prefetched)
    if block is not None:
        parts.append(block)
    return "\n\n".join(parts)


def decide_prompt(state: State, *, config: SessionSettings) -> Decision:
    if config.rule_set.assembled_prompt:
        text, notices = assemble(state, config)
        if text == state.system_prompt and not state.prompt_fresh:
            return NOTHING
        events: tuple[Event, ...] = (*(notices if state.prompt_fresh else ()),
                                     SystemPromptSet(text=text))
        return Decision(events=events)
    prefetched = state.turn.prefetched if state.turn is not None else ()
    text = build_system_prompt(state, prefetched, config=config)
    if text == state.system_prompt:
        return NOTHING
    return Decision(events=(SystemPromptSet(text=text),))


def mark_stale(state: State) -> State:
    """``state`` with its prompt inputs due to be read again at the next turn (compression
    calls this from its fold: the summary may have moved memory; the prompt is rebuilt)."""
    return attrs.evolve(state, prompt_stale=True)
