"""Rules 8: tools the caller runs itself, as ``Agent.run`` takes them (the gateway passes its
client's): OpenAI function definitions made ``ToolSpec``s, and the caller's results of the
calls a turn ended on (``client_tool_calls``) checked against those calls.

    result = agent.run("Weather in Paris?", client_tools=[{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {...}}}}])
    if result.turn_exit_reason == "client_tool_calls":
        answers = [{"role": "tool", "tool_call_id": c.id, "content": run(c)}
                   for c in result.tool_calls]
        result = agent.run("", tool_results=answers)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from stages.errors import UsageError
from stages.log.messages import Message, ToolCall, canonical_json, from_openai
from stages.log.tool_specs import ToolSpec


def client_spec(raw: Mapping[str, Any] | ToolSpec) -> ToolSpec:
    """An OpenAI tool (``{"type": "function", "function": {name, description, parameters}}``,
    or the function object itself) as a ``ToolSpec``."""
    if isinstance(raw, ToolSpec):
        return raw
    function = raw.get("function", raw) if raw.get("type", "function") == "function" else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str) \
            or not function["name"]:
        raise UsageError(f"a client tool is a function with a name, got {raw!r:.200}")
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(parameters, Mapping):
        raise UsageError(f"the parameters of client tool {function['name']!r} must be a JSON "
                         "schema (an object)")
    description = function.get("description") or ""
    if not isinstance(description, str):
        raise UsageError(f"the description of client tool {function['name']!r} must be text")
    return ToolSpec(name=function["name"], description=description,
                    parameters=canonical_json(json.loads(json.dumps(parameters))))


def client_specs(tools: Sequence[Mapping[str, Any] | ToolSpec], own: Sequence[str]
                 ) -> tuple[ToolSpec, ...]:
    """The caller's tools; a name twice, or the name of one of the session's own tools, is
    refused (the model could not tell which it calls)."""
    specs = tuple(client_spec(t) for t in tools)
    names = [s.name for s in specs]
    clash = sorted({n for n in names if names.count(n) > 1} | (set(names) & set(own)))
    if clash:
        raise UsageError(f"client tools must have names of their own: {', '.join(clash)} "
                         "is given twice or is a tool the agent runs itself")
    return specs


def unanswered(messages: Sequence[Message]) -> tuple[ToolCall, ...]:
    """The calls of the history's last assistant message that no tool message after it
    answers: those a ``client_tool_calls`` turn left for the caller."""
    answered: set[str] = set()
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "tool":
            answered.add(message.tool_call_id or "")
        elif message.role == "assistant":
            return tuple(c for c in message.tool_calls if c.id not in answered)
        else:
            return ()
    return ()


def client_results(results: Sequence[Mapping[str, Any]], waiting: Sequence[ToolCall]
                   ) -> tuple[Message, ...]:
    """The caller's tool messages, each answering one of the ``waiting`` calls and all of
    them answered (a provider refuses a history with a call left unanswered)."""
    messages = tuple(from_openai({**r, "role": "tool"}) for r in results)
    given = [m.tool_call_id for m in messages]
    expected = [c.id for c in waiting]
    if sorted(map(str, given)) != sorted(expected):
        raise UsageError(f"the tool results must answer the calls the last turn ended on "
                         f"({', '.join(expected) or 'none'}), each once; got "
                         f"{', '.join(map(str, given)) or 'none'}")
    return messages
