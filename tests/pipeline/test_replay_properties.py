"""Replay properties of the real pipeline.

Live sessions run through ``pipeline.agent.Agent`` with a strict scripted model client and real
tools, writing a real event log; ``pipeline.shell.replay.replay`` must then reproduce every event.
A log whose decision event was altered (and re-chained, so it is a valid log) must diverge at
exactly that event, in the stage that makes it. The replies each turn gets are found first by
running the same script through the pure simulation (``tests.strategies.simulation``), so the
client can be strict: it fails on an unexpected call and on unused replies.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from effects.eventlog.codec import from_payload
from effects.eventlog.envelope import Envelope
from effects.eventlog.store import SessionLog, read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import ReplayReport, replay
from pipeline.tools import Tool
from stages.decision import ModelRequest
from stages.errors import ProviderHTTPError, ProviderTimeoutError
from stages.fold import fold
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.messages import Message, ToolCall
from tests.strategies.scripts import (
    FailStep,
    ReplyStep,
    SessionScript,
    Step,
    TurnScript,
    session_scripts,
)
from tests.strategies.simulation import SIM_CWD, check_pairs, drive

PROPERTY = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Compression (a summary call, a child session) is driven live in tests/pipeline/test_context.py.
SCRIPTS = session_scripts(cut=False, max_turns=3, max_steps=5).map(
    lambda s: attrs.evolve(s, compression=False))


# --- the effects the live runs use -------------------------------------------------------------

def read(path: str = "") -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    return f"contents of {path!r}"


def write(text: str, n: int = 0) -> dict:
    """Write a file.

    Args:
        text: What to write.
        n: How many times.
    """
    return {"written": len(text) * max(n, 1)}


def ask(question: str = "") -> str:
    """Ask the user a question.

    Args:
        question: The question.
    """
    return f"the user says yes to {question!r}"


TOOLS = [Tool.from_function(read, read_only=True), Tool.from_function(write),
         Tool.from_function(ask, interactive=True)]


class CountingClock:
    def __init__(self) -> None:
        self.ticks = 0

    def now(self) -> str:
        self.ticks += 1
        return f"2026-01-01T00:00:{self.ticks // 1000:02d}.{self.ticks % 1000:06d}+00:00"

    def monotonic(self) -> float:
        self.ticks += 1
        return self.ticks / 1000


class CountingIds:
    def __init__(self) -> None:
        self.count = 0

    def session_id(self) -> str:
        return "prop_session"

    def new_id(self) -> str:
        self.count += 1
        return f"id{self.count:04d}"


class ScriptedModel:
    """A strict ``ModelClient``: answers with the queued steps in order; a call with nothing
    queued fails the test, and so does a step left unused (``assert_complete``)."""

    def __init__(self, interrupt: Callable[[], None]) -> None:
        self.queue: list[Step] = []
        self.interrupt = interrupt
        self.requests: list[ModelRequest] = []
        self.calls = 0

    def expect(self, steps: list[Step]) -> None:
        self.assert_complete()
        self.queue = list(steps)

    def complete(self, request: ModelRequest, *, on_delta=None, cancel=None) -> ev.ModelReplied:
        assert self.queue, f"unexpected model call #{len(self.requests) + 1} ({request.purpose})"
        assert violations(request.messages) == []
        self.requests.append(request)
        step = self.queue.pop(0)
        if isinstance(step, FailStep):
            error = {"ProviderHTTPError": ProviderHTTPError}.get(step.error_type,
                                                                 ProviderTimeoutError)
            raise error(step.message, status=step.status)
        assert isinstance(step, ReplyStep)
        if step.then_interrupt:
            self.interrupt()
        calls = []
        for c in step.calls:
            self.calls += 1
            calls.append(ToolCall(id=f"call_{self.calls}", name=c.name, arguments=c.arguments))
        if on_delta is not None and step.content:
            on_delta(step.content)
        return ev.ModelReplied(
            message=Message(role="assistant", content=step.content, tool_calls=tuple(calls),
                            reasoning=step.reasoning),
            finish_reason="tool_calls" if calls else "stop",
            usage=ev.Usage(input_tokens=10, output_tokens=len(calls) + 1), model="scripted",
            latency_ms=1.5, streamed=on_delta is not None)

    def assert_complete(self) -> None:
        assert not self.queue, f"{len(self.queue)} scripted replies were not asked for"


# --- running a script live ---------------------------------------------------------------------

@attrs.frozen
class LiveRun:
    home: Path
    session_id: str
    envelopes: list[Envelope]
    simulated: list[ev.Event]

    @property
    def root(self) -> Path:
        return self.home / "sessions"


def _agent(home: Path, script: SessionScript, model: ScriptedModel | None, clock: CountingClock,
           ids: CountingIds, session_id: str | None = None) -> Agent:
    return Agent(client=model, tools=TOOLS, home=home, durability="flush",
                 max_turns=script.max_turns, context_length=script.context_length,
                 compression=script.compression,
                 clock=clock, ids=ids, session_id=session_id, stream=False, max_retries=0,
                 cwd=_workdir(home))


def _workdir(home: Path) -> Path:
    """An empty working directory named as the simulation's, so that paths the model sends
    reach the same directories (relative to it) in both."""
    workdir = home / "work" / Path(SIM_CWD).name
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def run_live(home: Path, script: SessionScript, resume_at: int | None) -> LiveRun:
    """Run ``script`` through a real Agent (re-opening the session before turn ``resume_at``)."""
    simulation = drive(script)
    clock, ids = CountingClock(), CountingIds()
    holder: list[Agent] = []
    model = ScriptedModel(interrupt=lambda: holder[-1].interrupt())
    agent = _agent(home, script, model, clock, ids)
    holder.append(agent)
    history = None
    if script.history is not None:
        history = [{"role": role, "content": text} for u, a in script.history
                   for role, text in (("user", u), ("assistant", a))]
    try:
        for index, turn in enumerate(script.turns):
            if index == resume_at:
                sid = agent.session_id
                agent.close()
                agent = _agent(home, script, model, clock, ids, session_id=sid)
                holder.append(agent)
            model.expect(simulation.consumed[index])
            if turn.interrupt_first:
                agent.interrupt()
            result = agent.run_conversation(turn.user, system_message=turn.system_message,
                                            conversation_history=history if index == 0 else None)
            model.assert_complete()
            assert result["api_calls"] == len(simulation.consumed[index])
            assert violations([Message(**_fields(m)) for m in result["messages"]]) == []
    finally:
        agent.close()
    sid = agent.session_id
    assert sid is not None
    envelopes = list(read_envelopes(session_path(home / "sessions", sid)))
    return LiveRun(home=home, session_id=sid, envelopes=envelopes, simulated=simulation.events)


def _fields(raw: dict) -> dict:
    from stages.log.messages import from_openai
    return {k: v for k, v in attrs.asdict(from_openai(raw), recurse=False).items()
            if k != "wire"}


def events_of(envelopes: list[Envelope]) -> list[ev.Event]:
    return [from_payload(e.kind, e.schema_version, e.payload) for e in envelopes]


def _one_process(events: list[ev.Event]) -> list[ev.Event]:
    """The events as if one process ran the session (as the simulation does): without the
    sandbox probe each re-opening process makes."""
    out: list[ev.Event] = []
    reopened = False
    for event in events:
        if isinstance(event, ev.SandboxProbed) and reopened:
            reopened = False
            continue
        reopened = reopened or isinstance(event, ev.SessionResumed)
        out.append(event)
    return out


# --- properties --------------------------------------------------------------------------------

def _resume_at(script: SessionScript, data: st.DataObject) -> int | None:
    """Maybe re-open the session (a new process: ``SessionResumed``) before some later turn."""
    if len(script.turns) < 2:
        return None
    return data.draw(st.none() | st.integers(1, len(script.turns) - 1), label="resume_at")


@PROPERTY
@given(script=SCRIPTS, data=st.data())
def test_replay_of_a_live_run_is_identical(script: SessionScript, data: st.DataObject) -> None:
    resume_at = _resume_at(script, data)
    with tempfile.TemporaryDirectory() as tmp:
        live = run_live(Path(tmp), script, resume_at)
        report = replay(live.root, live.session_id)
        assert report.identical, report.describe()
        assert report.events == len(live.envelopes)
        assert not report.unfinished_tail
        assert report.describe() == f"identical ({len(live.envelopes)} events)"

        logged = events_of(live.envelopes)
        # the pure simulation models the runner (context pressure aside: token estimates differ,
        # the simulation's tools have other schemas and its ids are shorter)
        skip = {ev.SessionResumed.kind, ev.ContextPressure.kind}
        kinds = [e.kind for e in _one_process(logged) if e.kind not in skip]
        assert kinds == [e.kind for e in live.simulated if e.kind not in skip]
        state = fold(logged)
        assert violations(state.messages) == []
        check_pairs(state.messages)
        assert state.turns == len(script.turns)
        resumes = sum(e.kind == ev.SessionResumed.kind for e in logged)
        assert resumes == (0 if resume_at is None else 1)


# The stages that end a turn, each under its own name.
CLOSERS = frozenset({"answer", "interrupt", "recovery", "continuation"})

MUTATIONS: dict[str, tuple[frozenset[str], Callable[[dict], dict]]] = {
    ev.ModelRequested.kind: (
        frozenset({"request"}), lambda p: {**p, "estimated_tokens": p["estimated_tokens"] + 1}),
    ev.SystemPromptSet.kind: (
        frozenset({"prompt"}), lambda p: {**p, "text": p["text"] + " (edited)"}),
    ev.ContextPressure.kind: (
        frozenset({"preflight"}),
        lambda p: {**p, "threshold_tokens": p["threshold_tokens"] + 1}),
    ev.BudgetExhausted.kind: (
        frozenset({"budget"}), lambda p: {**p, "prompt": p["prompt"].upper()}),
    ev.ToolsPlanned.kind: (
        frozenset({"tool_plan"}), lambda p: {**p, "concurrent": not p["concurrent"]}),
    ev.ToolCallRejected.kind: (
        CLOSERS | {"tool_plan"}, lambda p: {**p, "reason": p["reason"] + "!"}),
    ev.TurnFinished.kind: (CLOSERS, lambda p: {**p, "completed": not p["completed"]}),
}
"""For each decision kind: the stages that may decide it, and a change that keeps the payload
valid. Every decision is labelled by the stage that made it, never by a generic router."""


def rewrite(root: Path, session_id: str, envelopes: list[Envelope]) -> None:
    """Replace the session's log with ``envelopes``, re-chained through real appends."""
    path = session_path(root, session_id)
    path.unlink()
    with SessionLog.open(root, session_id, durability="flush") as log:
        for e in envelopes:
            log.append(e.kind, e.schema_version, e.payload, e.recorded_at)


@PROPERTY
@given(script=SCRIPTS, data=st.data())
def test_a_changed_decision_diverges_at_its_seq_and_stage(script: SessionScript,
                                                           data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        live = run_live(Path(tmp), script, _resume_at(script, data))
        decisions = [e for e in live.envelopes if e.kind in MUTATIONS]
        assert decisions, "every turn makes decisions"
        target = data.draw(st.sampled_from(decisions), label="mutated")
        stages, change = MUTATIONS[target.kind]
        mutated = [msgspec.structs.replace(e, payload=change(e.payload))
                   if e.seq == target.seq else e for e in live.envelopes]
        from_payload(target.kind, target.schema_version, mutated[target.seq].payload)  # valid
        rewrite(live.root, live.session_id, mutated)

        report: ReplayReport = replay(live.root, live.session_id)
        assert not report.identical
        divergence = report.divergence
        assert divergence.seq == target.seq and divergence.stage in stages, report.describe()
        assert report.events == target.seq
        assert divergence.expected.startswith(target.kind)
        assert divergence.produced.startswith(target.kind)
        assert divergence.expected != divergence.produced
        produced = json.loads(divergence.produced.split(" ", 1)[1])
        assert produced == target.payload  # replay re-derives the original decision
        assert report.describe().startswith(
            f"diverged at seq {target.seq} in stage {divergence.stage}")


@PROPERTY
@given(script=SCRIPTS, data=st.data())
def test_a_log_cut_anywhere_replays_up_to_its_end(script: SessionScript,
                                                  data: st.DataObject) -> None:
    """A crash after any record: the prefix replays identically; a cut inside a turn is reported
    as an unfinished tail, not as a divergence."""
    with tempfile.TemporaryDirectory() as tmp:
        live = run_live(Path(tmp), script, _resume_at(script, data))
        cut = data.draw(st.integers(1, len(live.envelopes)), label="cut")
        rewrite(live.root, live.session_id, live.envelopes[:cut])
        report = replay(live.root, live.session_id)
        assert report.identical, report.describe()
        assert report.events == cut
        state = fold(events_of(live.envelopes[:cut]))
        open_turn = state.turn is not None and state.turn.finished is None
        before_turn = live.envelopes[cut - 1].kind == ev.HistoryLoaded.kind
        assert report.unfinished_tail == (open_turn or before_turn)


def test_a_log_cut_between_history_and_turn_start_is_an_unfinished_tail(tmp_path: Path) -> None:
    script = SessionScript(max_turns=2, history=(("old question", "old answer"),),
                           turns=(TurnScript(user="hi", steps=(ReplyStep(content="hello"),)),))
    live = run_live(tmp_path, script, None)
    cut = [e.kind for e in live.envelopes].index(ev.HistoryLoaded.kind) + 1
    rewrite(live.root, live.session_id, live.envelopes[:cut])
    report = replay(live.root, live.session_id)
    assert report.identical, report.describe()
    assert report.unfinished_tail


class _OnceBroken:
    """A client whose first reply is poisoned by ``first``; later replies are plain text."""

    def __init__(self, first: Callable[[], ev.ModelReplied]) -> None:
        self.first: Callable[[], ev.ModelReplied] | None = first

    def complete(self, request: ModelRequest, *, on_delta=None, cancel=None) -> ev.ModelReplied:
        if self.first is not None:
            first, self.first = self.first, None
            return first()
        return ev.ModelReplied(message=Message(role="assistant", content="fine"),
                               finish_reason="stop", usage=ev.Usage(), model="m", latency_ms=1.0)


def _crash() -> ev.ModelReplied:
    raise KeyboardInterrupt  # Ctrl-C in a chat, or any exception the adapter does not map


def test_a_turn_broken_by_an_exception_does_not_poison_the_next(tmp_path: Path) -> None:
    agent = Agent(client=_OnceBroken(_crash), home=tmp_path, durability="flush")
    with pytest.raises(KeyboardInterrupt):
        agent.run_conversation("hi")
    result = agent.run_conversation("again?")
    agent.close()
    history = [Message(role=m["role"], content=m["content"]) for m in result["messages"]]
    assert violations(history) == []
    assert replay(tmp_path / "sessions", result["session_id"]).identical


def _lone_surrogate() -> ev.ModelReplied:
    text = json.loads('"half an emoji: \\ud83d"')  # legal JSON, not encodable as UTF-8
    return ev.ModelReplied(message=Message(role="assistant", content=text), finish_reason="stop",
                           usage=ev.Usage(), model="m", latency_ms=1.0)


def test_a_reply_with_a_lone_surrogate_is_recorded(tmp_path: Path) -> None:
    agent = Agent(client=_OnceBroken(_lone_surrogate), home=tmp_path, durability="flush")
    result = agent.run_conversation("hi")
    agent.close()
    assert result["completed"]
    assert replay(tmp_path / "sessions", result["session_id"]).identical
