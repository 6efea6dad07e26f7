"""The session machine (``stages.session.machine``): named examples of its order, and a property
that any session it drives live (turns, tool calls, compressions, resumes, fork switches,
aborted turns) replays from its own log, command for command and record for record."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from stages import decision as d
from stages.fold import apply_event
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.state import State
from stages.log.tool_specs import ToolOutcome
from stages.session.machine import (
    AWAIT,
    Abort,
    Await,
    Command,
    Compress,
    Cut,
    End,
    ForkSwitch,
    Opening,
    Reopen,
    Turn,
    run_session,
)
from stages.turn.machine import Perform, Record
from tests.stages.helpers import SETTINGS, call, reply, spec
from tests.strategies.replay import replayed

TOOLS = (spec("read", read_only=True),)
FORKED = attrs.evolve(SETTINGS, max_tokens=64)


class Live:
    """Serves what the machine asks as a live shell would, from scripted model replies."""

    def __init__(self, replies: Iterable[ev.ModelReplied] = ()) -> None:
        self.replies = list(replies)
        self.synced: list[tuple[str, str]] = []
        self.clock = 0

    def __call__(self, ask: Perform, state: State) -> tuple[ev.Event, ...]:
        effect, self.clock = ask.effect, self.clock + 1
        now = f"t{self.clock}"
        match effect:
            case d.StartSession():
                return (ev.SessionStarted(session_id=effect.session_id or "s1", started_at=now,
                                          settings=effect.settings,
                                          parent_session_id=effect.parent_session_id),)
            case d.ResumeSession():
                settings = effect.settings or state.settings
                return (ev.SessionResumed(resumed_at=now, settings=settings),)
            case d.DeclareTools():
                same = effect.tools is None or effect.tools == state.tools
                return () if same else (ev.ToolsDeclared(tools=effect.tools),)
            case d.ProbeWindow():
                return (ev.ContextWindowProbed(provider=effect.provider, model=effect.model,
                                               tokens=8192, source="props"),)
            case d.ProbeSandbox():
                return (ev.SandboxProbed(mode=state.settings.sandbox, confined=True,
                                         detail="bwrap"),)
            case d.SyncMemory():
                self.synced.append((effect.user_message, effect.answer))
                return ()
            case d.SwitchSettings():
                return (ev.SessionForked(origin_session_id="s0", origin_seq=3, forked_at=now,
                                         settings=FORKED),)
            case d.AbortTurn():
                return (ev.TurnAborted(error=effect.error),)
            case d.BeginTurn():
                return (ev.TurnStarted(turn_id=f"turn{self.clock}", task_id=f"task{self.clock}",
                                       started_at=now, user_message=effect.user_message),)
            case d.CallModel():
                return (self.replies.pop(0) if self.replies else reply("done"),)
            case d.RunTools():
                return tuple(ev.ToolRan(outcome=ToolOutcome(
                    call_id=c.call_id, name=c.name, content="ok", ok=True, error=None))
                    for c in effect.calls)
            case d.ReadClock():
                return (ev.ClockRead(epoch=1000.0 + self.clock),)
            case d.ReadPromptInputs():
                return (ev.PromptInputsRead(),)
            case d.RequestCompression():
                return (ev.CompressionRequested(requested_at=now),)
            case d.InheritContext() | d.RestoreTools() | d.StartMemory() | d.PollInterrupt():
                return ()
        raise AssertionError(f"unexpected effect {effect!r}")


def drive(flow: Any, serve: Callable[[Perform, State], Sequence[ev.Event]],
          commands: Callable[[], Command], state: State | None = None
          ) -> tuple[list[ev.Event], list[tuple[str, str]], State]:
    """Run ``flow`` to its end: what it records, what it asks (stage, what) and the state."""
    state = State() if state is None else state
    log: list[ev.Event] = []
    asks: list[tuple[str, str]] = []
    ask = next(flow)
    while True:
        if isinstance(ask, Await):
            asks.append(("await", ""))
            reply_to: Any = commands()
        else:
            if isinstance(ask, Record):
                events: Sequence[ev.Event] = ask.events
                asks.extend((ask.stage, e.kind) for e in events)
            else:
                asks.append((ask.stage, type(ask.effect).__name__))
                events = serve(ask, state)
                if ask.optional:
                    assert len(events) <= 1
                else:
                    assert len(events) == ask.count, (ask, events)
                assert all(e.kind in ask.kinds for e in events), (ask, events)
            for event in events:
                state = apply_event(state, event)
                log.append(event)
            reply_to = state
        try:
            ask = flow.send(reply_to)
        except StopIteration:
            return log, asks, state


def scripted(*commands: Command) -> Callable[[], Command]:
    queue = list(commands)
    return lambda: queue.pop(0) if queue else End()


OPENING = Opening(settings=SETTINGS, session_id="s1", tools=TOOLS)


# --- named examples -------------------------------------------------------------------------
def test_a_new_session_starts_declares_its_tools_starts_memory_and_probes_the_window() -> None:
    log, asks, _ = drive(run_session(OPENING), Live(), scripted())
    assert asks == [("session", "StartSession"), ("session", "InheritContext"),
                    ("session", "DeclareTools"), ("session", "ProbeSandbox"),
                    ("memory", "StartMemory"), ("session", "ProbeWindow"), ("await", "")]
    assert [e.kind for e in log] == ["session_started", "tools_declared", "sandbox_probed",
                                     "context_window_probed"]


def test_a_configured_window_is_not_probed() -> None:
    opening = attrs.evolve(OPENING, settings=attrs.evolve(SETTINGS, context_length=4096))
    _, asks, _ = drive(run_session(opening), Live(), scripted())
    assert ("session", "ProbeWindow") not in asks


def test_a_resumed_session_closes_the_turn_a_crash_left_open_then_restores_its_tools() -> None:
    log, _, state = drive(run_session(OPENING), Live(), scripted(Turn(user_message="hi")))
    crashed = [e for e in log if e.kind != "turn_finished"]
    before = State()
    for event in crashed:
        before = apply_event(before, event)
    assert before.turn is not None and before.turn.finished is None
    resumed = Opening(resume=True, settings=SETTINGS, tools=TOOLS)
    log2, asks, after = drive(run_session(resumed), Live(), scripted(), state=before)
    assert asks[0] == ("session", "ResumeSession")
    assert asks[1][0] == "recovery" and asks[-5:] == [
        ("session", "DeclareTools"), ("session", "ProbeSandbox"), ("tools", "RestoreTools"),
        ("memory", "StartMemory"), ("await", "")]
    assert log2[0].kind == "session_resumed" and after.turn.finished is not None
    assert after.turn.finished.exit_reason == "abandoned"


def test_a_split_s_child_inherits_and_declares_but_neither_starts_memory_nor_probes() -> None:
    """The window and memory are its parent's; the sandbox is its process's, asked again."""
    opening = attrs.evolve(OPENING, child=True, parent_session_id="s0")
    _, asks, _ = drive(run_session(opening), Live(), scripted())
    assert asks == [("session", "StartSession"), ("session", "InheritContext"),
                    ("session", "DeclareTools"), ("session", "ProbeSandbox"), ("await", "")]



def test_a_completed_answer_goes_to_memory_a_failed_turn_does_not() -> None:
    live = Live([reply("four")])
    drive(run_session(OPENING), live, scripted(Turn(user_message="2+2?")))
    assert live.synced == [("2+2?", "four")]
    failing = Live([ev.ModelFailed(error_type="ProviderError", message="nope", status=400)])
    no_retry = attrs.evolve(OPENING, settings=attrs.evolve(SETTINGS, max_retries=0))
    _, _, state = drive(run_session(no_retry), failing, scripted(Turn(user_message="2+2?")))
    assert not state.turn.finished.completed and failing.synced == []


def test_a_cut_turn_goes_back_to_waiting_and_abort_closes_it() -> None:
    live = Live([reply(None, call("c1", "read"))])
    flow = run_session(OPENING)
    ask = next(flow)
    state = State()
    while not isinstance(ask, Perform) or not isinstance(ask.effect, d.RunTools):
        if isinstance(ask, Await):
            ask = flow.send(Turn(user_message="read it"))
            continue
        events = ask.events if isinstance(ask, Record) else live(ask, state)
        for event in events:
            state = apply_event(state, event)
        ask = flow.send(state)
    assert flow.throw(Cut()) is AWAIT
    ask = flow.send(Abort(error="KeyboardInterrupt: "))
    assert isinstance(ask, Perform) and isinstance(ask.effect, d.AbortTurn)
    state = apply_event(state, ev.TurnAborted(error="KeyboardInterrupt: "))
    closing = flow.send(state)
    assert isinstance(closing, Record) and closing.stage == "recovery"
    for event in closing.events:
        state = apply_event(state, event)
    assert state.turn.finished is not None and flow.send(state) is AWAIT


def test_end_ends_the_machine() -> None:
    flow = run_session(None)
    assert next(flow) is AWAIT
    try:
        flow.send(End())
    except StopIteration:
        pass
    else:
        raise AssertionError("the machine went on after End")


# --- the property -----------------------------------------------------------------------------
turns = st.builds(lambda text, tools: Turn(user_message=text) if not tools else
                  Turn(user_message=f"{text} (read it)"),
                  st.sampled_from(["hi", "what now?", "again"]), st.booleans())
commands = st.lists(st.one_of(turns, st.just(Compress()), st.just(Reopen(tools=TOOLS)),
                              st.just(ForkSwitch(tools=TOOLS)), st.just("cut")),
                    min_size=1, max_size=8)


def _replies(script: Sequence[Any]) -> list[ev.ModelReplied]:
    out = []
    for i, command in enumerate(script):
        if isinstance(command, Turn) and command.user_message.endswith("(read it)"):
            out += [reply(None, call(f"c{i}", "read")), reply("read")]
        elif isinstance(command, Turn):
            out.append(reply(f"answer {i}"))
    return out


def _live_session(script: Sequence[Any]) -> list[ev.Event]:
    """Drive the script live; a ``"cut"`` stops the next turn at its tool run, then aborts."""
    live = Live(_replies(script))
    flow, state, log = run_session(OPENING), State(), []
    queue, cut_next = list(script), False
    ask = next(flow)
    while True:
        if isinstance(ask, Await):
            command = queue.pop(0) if queue else End()
            if command == "cut":
                cut_next = True
                command = Turn(user_message="cut (read it)")
                live.replies[:0] = [reply(None, call("cx", "read"))]
            try:
                ask = flow.send(command)
            except StopIteration:
                return log
            continue
        if cut_next and isinstance(ask, Perform) and isinstance(ask.effect, d.RunTools):
            cut_next = False
            assert flow.throw(Cut()) is AWAIT
            ask = flow.send(Abort(error="Stopped: by the user"))
            continue
        events = ask.events if isinstance(ask, Record) else live(ask, state)
        for event in events:
            state = apply_event(state, event)
            log.append(event)
        try:
            ask = flow.send(state)
        except StopIteration:
            return log


@settings(deadline=None, max_examples=60)
@given(commands)
def test_a_session_driven_live_replays_from_its_own_log(script) -> None:
    log = _live_session(script)
    assert replayed(log) == log
    state = State()
    for event in log:
        state = apply_event(state, event)
    assert violations(state.messages) == []
    assert [e.kind for e in log[:2]] == ["session_started", "tools_declared"]
    assert sum(isinstance(e, ev.TurnAborted) for e in log) == script.count("cut")
