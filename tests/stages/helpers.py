"""Small builders for stage tests: state is always the fold of events, never built by hand."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from stages.decision import Decision, Finish, PrepareCall
from stages.fold import apply_event, fold
from stages.log import events as ev
from stages.log.messages import Message, ToolCall
from stages.log.state import State
from stages.log.tool_specs import ToolOutcome, ToolSpec
from stages.turn import machine
from stages.turn.step import ROUTES, next_stage

SETTINGS = ev.SessionSettings(model="m", provider="p", max_turns=3)


def spec(name: str, *, interactive: bool = False, read_only: bool = False) -> ToolSpec:
    return ToolSpec(name=name, description=f"the {name} tool", parameters='{"type":"object"}',
                    interactive=interactive, read_only=read_only)


def call(call_id: str, name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def reply(content: str | None = None, *calls: ToolCall, finish_reason: str | None = None,
          usage: ev.Usage | None = None) -> ev.ModelReplied:
    reason = finish_reason or ("tool_calls" if calls else "stop")
    return ev.ModelReplied(message=Message(role="assistant", content=content, tool_calls=calls),
                           finish_reason=reason, usage=usage or ev.Usage(input_tokens=1),
                           model="m", latency_ms=1.0)


def ran(call_: ToolCall, content: str = "ok", ok: bool = True) -> ev.ToolRan:
    return ev.ToolRan(outcome=ToolOutcome(call_id=call_.id, name=call_.name, content=content,
                                          ok=ok, error=None if ok else content))


def requested(state: State, purpose: str = "step") -> ev.ModelRequested:
    assert state.turn is not None
    return ev.ModelRequested(call_index=state.turn.api_calls, purpose=purpose, model="m",
                             provider="p", message_count=len(state.messages), tool_count=0,
                             estimated_tokens=0)


def session(*tools: ToolSpec, settings: ev.SessionSettings = SETTINGS) -> State:
    events: list[ev.Event] = [ev.SessionStarted(session_id="s1", started_at="t0",
                                                settings=settings)]
    if tools:
        events.append(ev.ToolsDeclared(tools=tools))
    return fold(events)


def turn(state: State, text: str = "hello", *, system_message: str | None = None,
         index: int = 0) -> State:
    return apply_event(state, ev.TurnStarted(turn_id=f"turn{index}", task_id=f"task{index}",
                                             started_at="t1", user_message=text,
                                             system_message=system_message))


def then(state: State, *events: ev.Event | Iterable[ev.Event] | Decision) -> State:
    """Apply events (or a decision's events) in order."""
    for item in events:
        if isinstance(item, Decision):
            state = fold(item.events, state)
        elif isinstance(item, Iterable):
            state = fold(item, state)
        else:
            state = apply_event(state, item)
    return state


def answered(state: State, reply_event: ev.ModelReplied) -> State:
    """A model call and its reply."""
    return then(state, requested(state), reply_event)


def decide_next(state: State, *, config: ev.SessionSettings = SETTINGS) -> Decision:
    """What the turn machine does next from ``state``: the decision of the stage
    ``next_stage`` names, ``Finish`` or, for ``call``, ``PrepareCall``."""
    stage = next_stage(state)
    if stage == "finish":
        return Decision(next=Finish())
    if stage == "call":
        return Decision(next=PrepareCall())
    return ROUTES[stage](state, config=config)


Serve = Callable[[machine.Perform, State], tuple[ev.Event, ...]]


def drive_turn(state: State, serve: Serve, text: str = "hello"
               ) -> tuple[list[tuple[str, str]], State]:
    """Run one turn of the machine; ``serve(ask, state)`` returns the observations for each
    effect (checked against what the ask expects). Returns the asks as (stage, what) pairs and
    the state at the end."""
    seen: list[tuple[str, str]] = []
    flow = machine.run_turn(text)
    ask = next(flow)
    while True:
        if isinstance(ask, machine.Record):
            events = ask.events
            seen.extend((ask.stage, e.kind) for e in events)
        else:
            seen.append((ask.stage, type(ask.effect).__name__))
            events = serve(ask, state)
            assert len(events) == (0 if ask.optional and not events else ask.count)
            assert all(e.kind in ask.kinds for e in events)
        for event in events:
            state = apply_event(state, event)
        try:
            ask = flow.send(state)
        except StopIteration:
            return seen, state
