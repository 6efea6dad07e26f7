"""The turn machine's asks for prompt inputs, memory prefetch and hints (rules 3), read off the
generator with hand-served observations."""

from __future__ import annotations

import json

import attrs

from stages.decision import (
    BeginTurn,
    CallModel,
    PollInterrupt,
    PrefetchMemory,
    ReadHints,
    ReadPromptInputs,
    RunTools,
)
from stages.fold import apply_event
from stages.log import events as ev
from stages.log.state import State
from stages.log.tool_specs import ToolOutcome
from stages.prompt.untrusted import boundary, wrap
from stages.turn import machine as turn
from tests.stages.helpers import SETTINGS, call, drive_turn, reply, spec

CONFIG = attrs.evolve(SETTINGS, load_context=True, memory_provider="recall")


def _session() -> State:
    state = apply_event(State(), ev.SessionStarted(session_id="s", started_at="t",
                                                   settings=CONFIG))
    return apply_event(state, ev.ToolsDeclared(tools=(spec("read", read_only=True),)))


def _serve(replies: list[ev.Event], requests: list):
    def serve(ask: turn.Perform, state: State) -> tuple[ev.Event, ...]:
        effect = ask.effect
        if isinstance(effect, BeginTurn):
            return (ev.TurnStarted(turn_id="t", task_id="k", started_at="t",
                                   user_message=effect.user_message),)
        if isinstance(effect, PollInterrupt):
            return ()
        if isinstance(effect, ReadPromptInputs):
            return (ev.PromptInputsRead(cwd="/r", context_files=(("AGENTS.md", "Be tidy."),)),)
        if isinstance(effect, PrefetchMemory):
            assert effect.query == "where is it?"
            return (ev.MemoryPrefetched(results=(("recall", "It is in pkg."),)),)
        if isinstance(effect, ReadHints):
            assert effect == ReadHints(dirs=("/r/pkg/a.py", "/r/pkg"), cwd="/r")
            return (ev.HintsRead(dirs=effect.dirs, files=(("pkg/AGENTS.md", "Tabs."),)),)
        if isinstance(effect, CallModel):
            requests.append(effect.request)
            return (replies.pop(0),)
        if isinstance(effect, RunTools):
            return tuple(ev.ToolRan(outcome=ToolOutcome(call_id=c.call_id, name=c.name,
                                                        content="ok", ok=True))
                         for c in effect.calls)
        raise AssertionError(effect)
    return serve


_drive = drive_turn


def test_inputs_prefetch_and_hints_are_asked_in_order() -> None:
    requests: list = []
    replies = [reply(None, call("c1", "read", json.dumps({"path": "pkg/a.py"}))),
               reply("found it"), reply("bye")]
    asks, state = _drive(_session(), _serve(replies, requests), "where is it?")
    assert asks[:4] == [("input", "BeginTurn"), ("prompt", "ReadPromptInputs"),
                        ("memory", "PrefetchMemory"), ("prompt", "system_prompt_set")]
    planned = asks.index(("tool_plan", "tools_planned"))
    assert asks[planned + 1:planned + 4] == [("hints", "ReadHints"), ("hints", "hint_attached"),
                                             ("tools", "RunTools")]
    assert "Be tidy." in requests[0].system_prompt
    assert requests[0].messages[0].content.endswith("It is in pkg.\n</memory-context>")
    assert state.messages[0].content == "where is it?"
    assert state.messages[2].content == (wrap("ok", name="read", code=boundary("s"))
                                         + "\n\n[Subdirectory context discovered: pkg/AGENTS.md]"
                                         "\nTabs.")
    assert requests[1].system_prompt == requests[0].system_prompt
    # The next turn reads no inputs and asks the provider again, for its own message.
    replies_next = _serve(replies, requests)

    def serve_next(ask, state_):
        if isinstance(ask.effect, PrefetchMemory):
            return (ev.MemoryPrefetched(),)
        return replies_next(ask, state_)
    asks, state = _drive(state, serve_next, "thanks")
    assert ("prompt", "ReadPromptInputs") not in asks
    assert ("prompt", "system_prompt_set") not in asks
    assert requests[2].messages[-1].content == "thanks"
