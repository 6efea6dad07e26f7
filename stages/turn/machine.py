"""The turn as one machine: a generator with no I/O, driven by its caller (the shape of h11,
or httpx's ``Auth.auth_flow``).

``run_turn`` yields what it needs, one ask at a time:

* ``Record(stage, events)``: events decided by ``stage``;
* ``Perform(stage, effect, kinds, count)``: perform ``effect``, expecting ``count``
  observations of ``kinds`` (``optional``: one of ``kinds`` or none, as when polling for an
  interrupt).

The driver folds the events into the state and sends the new state back. The session machine
(``stages.session.machine``) runs turns as its sub-flows. The live shell
(``pipeline.shell.runner``) performs effects and appends to the log; a replay serves the logged
observations and compares the decisions; the hypothesis simulation serves scripted ones. The
whole order of a turn is in this one module, top to bottom.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import attrs

from stages.context.compression import decide_compressed, decide_compression, wants_compression
from stages.context.preflight import decide_between_turns, decide_preflight
from stages.decision import (
    AskApproval,
    BeginTurn,
    CallModel,
    CheckOutput,
    DecideApprovals,
    Decision,
    Effect,
    Finish,
    LoadHistory,
    Next,
    PollInterrupt,
    PrefetchMemory,
    PrepareCall,
    ReadClock,
    ReadHints,
    ReadPromptInputs,
    RefreshCredential,
    RunTools,
    Summarise,
    TakeCheckpoint,
    Wait,
)
from stages.log.content_parts import ImagePart
from stages.log.events import (
    ApprovalAnswered,
    ApprovalsDecided,
    ApprovalsPending,
    Checkpointed,
    ClockRead,
    ContextSummarised,
    CredentialRefreshed,
    Event,
    HintsRead,
    HistoryLoaded,
    Interrupted,
    MemoryPrefetched,
    ModelFailed,
    ModelReplied,
    OutputChecked,
    PromptInputsRead,
    SessionForked,
    SessionSettings,
    Steered,
    SummaryFailed,
    ToolRan,
    TurnStarted,
    Waited,
)
from stages.log.messages import Message
from stages.log.output_spec import OutputSpec
from stages.log.state import State
from stages.log.tool_specs import ToolSpec
from stages.prompt.hints import decide_hints, dirs_to_read
from stages.prompt.memory import decide_memory, needs_prefetch
from stages.prompt.system import decide_prompt, needs_inputs
from stages.recovery.credentials import decide_credentials
from stages.tools.checkpoints import checkpoint_before
from stages.turn.budget import decide_budget
from stages.turn.cache_marks import decide_cache_marks
from stages.turn.output import decide_output, output_candidate
from stages.turn.request import decide_request
from stages.turn.routing import decide_routing
from stages.turn.steering import steerable
from stages.turn.step import ROUTES, next_stage


@attrs.frozen
class Record:
    stage: str
    events: tuple[Event, ...]


@attrs.frozen
class Perform:
    stage: str
    effect: Effect
    kinds: tuple[str, ...]
    count: int = 1
    optional: bool = False


Ask = Record | Perform
# Asked between every two steps: one frozen value serves every turn. A fork that goes on inside
# a turn takes up its own settings here (``SessionForked``).
_POLL = Perform("interrupt", PollInterrupt(during="between_steps"),
                (Interrupted.kind, SessionForked.kind), optional=True)
# At a step boundary where a steered message may join (rules 8, ``stages.turn.steering``).
_POLL_STEER = Perform("interrupt", PollInterrupt(during="between_steps", steer=True),
                      (Interrupted.kind, SessionForked.kind, Steered.kind), optional=True)
Flow = Generator[Ask, State, State]
SubFlow = Flow
Stage = Callable[..., Decision]


def run_turn(user_message: str, *, system_message: str | None = None,
             history: tuple[Message, ...] | None = None, task_id: str | None = None,
             reasoning_effort: str | None = None, reasoning_budget: int | None = None,
             output: OutputSpec | None = None, client_tools: tuple[ToolSpec, ...] = (),
             tool_results: tuple[Message, ...] = (), images: tuple[ImagePart, ...] = ()) -> Flow:
    """One user turn, from the user's message (or the caller's results of the calls to its
    own tools the last turn ended on) to the turn's end; returns the state then. With
    ``output``, the answer is checked against it before the turn ends with it."""
    if history is not None:
        yield Perform("input", LoadHistory(messages=history), (HistoryLoaded.kind,))
    state = yield Perform("input", BeginTurn(user_message=user_message,
                                             system_message=system_message, task_id=task_id,
                                             reasoning_effort=reasoning_effort,
                                             reasoning_budget=reasoning_budget,
                                             output=output, client_tools=client_tools,
                                             tool_results=tool_results, images=images),
                          (TurnStarted.kind,))
    assert state.settings is not None, "a turn needs a started session"
    config = state.settings
    state = yield from _decide("preflight", decide_between_turns, state, config)
    state = yield from compression(state, config)
    state = yield from _decide("hints", decide_hints, state, config)
    if needs_inputs(state, config):
        state = yield Perform("prompt", ReadPromptInputs(), (PromptInputsRead.kind,))
    if (query := needs_prefetch(state, config)) is not None:
        state = yield Perform("memory", PrefetchMemory(query=query), (MemoryPrefetched.kind,))
    state = yield from _decide("memory", decide_memory, state, config)
    state = yield from _decide("prompt", decide_prompt, state, config)
    return (yield from steps(state, config))


def resume_turn(answers: tuple[ApprovalAnswered, ...] = ()) -> Flow:
    """A turn that waited for approvals goes on with their decisions (rules 8)."""
    state = yield Perform("approval", DecideApprovals(answers=answers), (ApprovalsDecided.kind,))
    assert state.settings is not None, "a turn needs a started session"
    return (yield from steps(state, state.settings))


def steps(state: State, config: SessionSettings) -> Flow:
    """The turn's steps, from its prompt (or the decisions it waited for) to its end, or to a
    pause for approvals."""
    while True:
        state = yield _POLL_STEER if steerable(state, config) else _POLL
        # Settings change inside a turn only where a fork goes on (``SessionForked``).
        config = state.settings or config
        stage = next_stage(state)
        if stage == "finish":
            return state
        if (answer := output_candidate(state, stage)) is not None:
            assert state.turn is not None and state.turn.output is not None
            state = yield Perform("output", CheckOutput(text=answer, spec=state.turn.output),
                                  (OutputChecked.kind,))
            stage = "output"
        step: Next | None = PrepareCall() if stage == "call" else None
        if step is None:
            decide = decide_output if stage == "output" else ROUTES[stage]
            decision = decide(state, config=config)
            state = yield Record(stage, decision.events)
            step = decision.next
        if isinstance(step, Finish):
            return state
        if isinstance(step, PrepareCall):
            state = yield from model_call(state, config)
        elif isinstance(step, RunTools):
            state = yield from _hints(state, config)
            if (checkpoint := checkpoint_before(state, step, config=config)) is not None:
                state = yield _checkpoint(checkpoint)
            state = yield Perform("tools", step, (ToolRan.kind,), count=len(step.calls))
        elif isinstance(step, Wait):
            state = yield Perform("backoff", step, (Waited.kind, Interrupted.kind))
        elif isinstance(step, RefreshCredential):
            state = yield Perform("credentials", step, (CredentialRefreshed.kind,))
        elif isinstance(step, AskApproval):
            state = yield Perform("approval", step, _answers(config))
            if state.turn is not None and state.turn.waiting:
                return state  # the turn waits for decisions (``resume_turn``)


def _answers(config: SessionSettings) -> tuple[str, ...]:
    """An approval is answered, or (rules 8) the turn pauses for it."""
    if config.rule_set.paused_approvals:
        return (ApprovalAnswered.kind, ApprovalsPending.kind)
    return (ApprovalAnswered.kind,)


def _checkpoint(effect: TakeCheckpoint) -> Perform:
    """Rules 7: the tree before the turn first changes it; nothing where none are kept."""
    return Perform("checkpoint", effect, (Checkpointed.kind,), optional=True)


def model_call(state: State, config: SessionSettings) -> SubFlow:
    """The stages before every model call, then the call."""
    if config.needs_clock:
        state = yield Perform("clock", ReadClock(), (ClockRead.kind,))
    state = yield from _decide("budget", decide_budget, state, config)
    state = yield from _decide("preflight", decide_preflight, state, config)
    state = yield from compression(state, config)
    state = yield from _decide("routing", decide_routing, state, config)
    state = yield from _decide("credentials", decide_credentials, state, config)
    marks = decide_cache_marks(state, config=config)
    request = decide_request(state, config=config, cache_marks=marks)
    state = yield Record("request", request.events)
    assert isinstance(request.next, CallModel)
    return (yield Perform("model_call", request.next,
                          (ModelReplied.kind, ModelFailed.kind, Interrupted.kind)))


def _hints(state: State, config: SessionSettings) -> SubFlow:
    """Context files of the directories the calls about to run reach, for their results."""
    dirs = dirs_to_read(state, config)
    if not dirs or state.prompt_inputs is None or state.prompt_inputs.cwd is None:
        return state
    state = yield Perform("hints", ReadHints(dirs=dirs, cwd=state.prompt_inputs.cwd),
                          (HintsRead.kind,))
    return (yield from _decide("hints", decide_hints, state, config))


def compression(state: State, config: SessionSettings) -> SubFlow:
    """Under context pressure (rules 3): the time (for the summary's cooldown), the plan, the
    summary (an effect), the outcome."""
    if not wants_compression(state, config):
        return state
    state = yield Perform("clock", ReadClock(), (ClockRead.kind,))
    plan = decide_compression(state, config=config)
    if not plan.events:
        return state
    state = yield Record("compression", plan.events)
    if isinstance(plan.next, Summarise):
        state = yield Perform("summary", plan.next,
                              (ContextSummarised.kind, SummaryFailed.kind))
    return (yield from _decide("compression", decide_compressed, state, config))


def _decide(name: str, stage: Stage, state: State, config: SessionSettings) -> SubFlow:
    decision = stage(state, config=config)
    if not decision.events:
        return state
    return (yield Record(name, decision.events))
