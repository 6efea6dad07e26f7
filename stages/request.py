"""Request stage: build the model request from the state (shared, not copied)."""

from __future__ import annotations

from stages.cache_marks import cache_marks_for
from stages.decision import CallModel, Decision, ModelRequest
from stages.events import ModelRequested, SessionSettings
from stages.preflight import estimate_tokens
from stages.state import State


def decide_request(state: State, *, config: SessionSettings) -> Decision:
    turn = state.turn
    if turn is None:
        raise ValueError("a model request needs an open turn")
    purpose = "budget_summary" if turn.budget_exhausted else "step"
    tools = () if turn.budget_exhausted else state.tools
    entry = config.chain[turn.provider_index]
    event = ModelRequested(call_index=turn.api_calls, purpose=purpose, model=entry.model,
                           provider=entry.provider, message_count=len(state.messages),
                           tool_count=len(tools), estimated_tokens=estimate_tokens(state))
    request = ModelRequest(model=entry.model, provider=entry.provider, api_mode=entry.api_mode,
                           purpose=purpose, system_prompt=state.system_prompt,
                           messages=state.messages, tools=tools, max_tokens=config.max_tokens,
                           stream=config.stream, base_url=entry.base_url,
                           credential_id=turn.credential_id,
                           tool_choice=config.tool_choice if tools else None,
                           cache_marks=cache_marks_for(state, entry, config=config),
                           cache_ttl=config.cache_ttl)
    return Decision(events=(event,), next=CallModel(request=request))
