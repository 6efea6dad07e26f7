"""The session as one machine, of the same shape as the turn's (``stages.turn.machine``):

    start or resume -> declare tools -> probe the window
      -> (turn [-> memory sync] [-> split] | compression [-> split] | fork switch | abort)*
      -> end (or the split's child goes on)

``run_session`` yields the turn machine's asks (``Record``, ``Perform``) and, between
commands, ``AWAIT``: the driver sends the next ``Command`` back. Live, the commands are the
caller's (``Agent.run``, ``Agent.compress``, a fork); in a replay they are read off the log, and
every observation is served from it. A driver that stops a command part way (an exception, a log
cut short) throws ``Cut`` in: the machine goes back to waiting, and ``Abort`` closes the turn.
"""

from __future__ import annotations

from collections.abc import Generator

import attrs

from stages.decision import (
    AbortTurn,
    DeclareTools,
    InheritContext,
    ProbeSandbox,
    ProbeWindow,
    RestoreTools,
    RestoreTree,
    ResumeSession,
    SplitSession,
    StartMemory,
    StartSession,
    SwitchSettings,
    SyncMemory,
)
from stages.log.content_parts import ImagePart
from stages.log.events import (
    ApprovalAnswered,
    ContextInherited,
    ContextWindowProbed,
    SandboxProbed,
    SessionForked,
    SessionResumed,
    SessionSettings,
    SessionSplit,
    SessionStarted,
    ToolsDeclared,
    TreeRestored,
    TurnAborted,
)
from stages.log.messages import Message
from stages.log.output_spec import OutputSpec
from stages.log.state import State
from stages.log.tool_specs import ToolSpec
from stages.session.compress_now import run_compression
from stages.turn.machine import Ask, Perform, Record, resume_turn, run_turn
from stages.turn.step import decide_abandon


@attrs.frozen
class Await:
    """Between commands: the driver sends the next ``Command``."""


AWAIT = Await()


class Cut(Exception):
    """Thrown in by the driver: the command in progress stopped part way."""


@attrs.frozen(kw_only=True)
class Opening:
    """How the session begins in this process. What is None is served from the log (replay).
    A split's ``child`` takes its window and memory from its parent: it neither starts the
    memory providers nor probes the window."""

    resume: bool = False
    settings: SessionSettings | None = None
    session_id: str | None = None
    parent_session_id: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    child: bool = False


@attrs.frozen(kw_only=True)
class Turn:
    user_message: str
    system_message: str | None = None
    history: tuple[Message, ...] | None = None
    task_id: str | None = None
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None
    # The schema the turn's answer must match (structured output).
    output: OutputSpec | None = None
    # Rules 8: the caller's own tools; its results of the calls the last turn ended on.
    client_tools: tuple[ToolSpec, ...] = ()
    tool_results: tuple[Message, ...] = ()
    images: tuple[ImagePart, ...] = ()


@attrs.frozen(kw_only=True)
class Decide:
    """The turn that waits for approvals goes on with these decisions (rules 8; a replay
    reads them off the log)."""

    answers: tuple[ApprovalAnswered, ...] = ()


@attrs.frozen
class Compress:
    """The user asks to compress now, between turns."""


@attrs.frozen(kw_only=True)
class RollBack:
    """Between turns, put the working tree back to the checkpoint taken before ``turn`` (None:
    the latest), or to ``commit`` of ``tree`` where the caller names one (a fork)."""

    turn: int | None = None
    tree: str | None = None
    commit: str | None = None


@attrs.frozen(kw_only=True)
class Abort:
    """Close the turn a ``Cut`` left open."""

    error: str


@attrs.frozen(kw_only=True)
class Reopen:
    """The session goes on in another process (a replay meets ``SessionResumed``)."""

    tools: tuple[ToolSpec, ...] | None = None


@attrs.frozen(kw_only=True)
class ForkSwitch:
    """A fork takes up its own settings (unless a turn did already) and its caller's tools."""

    tools: tuple[ToolSpec, ...] | None = None


@attrs.frozen
class End:
    """The session ends here (a replay: its log ends)."""


Command = Turn | Decide | Compress | RollBack | Abort | Reopen | ForkSwitch | End
SessionFlow = Generator[Ask | Await, State | Command, None]


def run_session(opening: Opening | None) -> SessionFlow:
    """One session in this process, from its opening (None: it is open already) to its end."""
    if opening is not None:
        yield from open_session(opening)
    while True:
        command = yield AWAIT
        assert not isinstance(command, State), "the driver sends a command at AWAIT"
        if isinstance(command, End):
            return
        try:
            state = yield from _command(command)
        except Cut:
            continue
        if isinstance(command, Turn | Decide | Compress) and (yield from _after(command, state)):
            return  # the session went on in the split's child


def open_session(opening: Opening) -> Generator[Ask, State, State]:
    """Start or resume; a split's child inherits its parent's context; the caller's tools; the
    sandbox; the toolset's and memory's own state; the window, when nobody said it."""
    if opening.resume:
        state = yield Perform("session", ResumeSession(settings=opening.settings),
                              (SessionResumed.kind,))
        if (abandon := decide_abandon(state)).events:
            state = yield Record("recovery", abandon.events)
    else:
        state = yield Perform("session", StartSession(
            settings=opening.settings, session_id=opening.session_id,
            parent_session_id=opening.parent_session_id), (SessionStarted.kind,))
        state = yield Perform("session", InheritContext(), (ContextInherited.kind,),
                              optional=True)
    state = yield Perform("session", DeclareTools(tools=opening.tools), (ToolsDeclared.kind,),
                          optional=True)
    # Each process that opens the session asks whether its sandbox starts (rules 7: recorded).
    state = yield Perform("session", ProbeSandbox(), (SandboxProbed.kind,), optional=True)
    if opening.child:
        return state
    if opening.resume:
        state = yield Perform("tools", RestoreTools(), (), count=0)
    state = yield Perform("memory", StartMemory(), (), count=0)
    if (probe := window_to_probe(state)) is not None:
        state = yield Perform("session", probe, (ContextWindowProbed.kind,), optional=True)
    return state


def _command(command: Command) -> Generator[Ask, State, State]:
    if isinstance(command, Turn):
        return (yield from run_turn(
            command.user_message, system_message=command.system_message,
            history=command.history, task_id=command.task_id,
            reasoning_effort=command.reasoning_effort, reasoning_budget=command.reasoning_budget,
            output=command.output, client_tools=command.client_tools,
            tool_results=command.tool_results, images=command.images))
    if isinstance(command, Decide):
        return (yield from resume_turn(command.answers))
    if isinstance(command, Compress):
        return (yield from run_compression())
    if isinstance(command, Abort):
        state = yield Perform("recovery", AbortTurn(error=command.error), (TurnAborted.kind,))
        abandon = decide_abandon(state)
        return (yield Record("recovery", abandon.events)) if abandon.events else state
    if isinstance(command, RollBack):
        return (yield Perform("rollback", RestoreTree(
            turn=command.turn, tree=command.tree, commit=command.commit), (TreeRestored.kind,)))
    if isinstance(command, Reopen):
        return (yield from open_session(Opening(resume=True, tools=command.tools)))
    assert isinstance(command, ForkSwitch), command
    state = yield Perform("fork", SwitchSettings(), (SessionForked.kind,), optional=True)
    return (yield Perform("session", DeclareTools(tools=command.tools), (ToolsDeclared.kind,),
                          optional=True))


def _after(command: Turn | Decide | Compress, state: State) -> Generator[Ask, State, bool]:
    """A completed answer goes to memory; a compression's split ends the session here."""
    if isinstance(command, Turn) and (answer := _completed_answer(state)) is not None:
        asked = command.user_message
        if not asked and state.turn is not None:  # rules 8: it went on from tool results
            asked = state.messages[state.turn.first_message].text
        yield Perform("memory", SyncMemory(user_message=asked, answer=answer), (), count=0)
    if not wants_split(state):
        return False
    state = yield Perform("session", SplitSession(context=inherited(state)), (SessionSplit.kind,),
                          optional=True)
    # A log cut between the child's start and the split's record goes on here (replay).
    return not wants_split(state)


SPLIT_REASON = "compression"


def inherited(state: State) -> ContextInherited:
    """What a split's child takes from its parent: the compressed history and the context's
    state."""
    assert state.session_id is not None
    ctx = state.context
    return ContextInherited(parent_session_id=state.session_id, reason=SPLIT_REASON,
                            messages=tuple(state.messages), summary=ctx.summary,
                            compressions=ctx.compressions, ineffective=ctx.ineffective,
                            disabled=ctx.disabled, cooldown_until=ctx.cooldown_until,
                            windows=ctx.windows, window_cap=ctx.window_cap,
                            approved_patterns=state.approved_patterns,
                            hint_dirs=tuple(sorted(state.hint_dirs)),
                            reasoning_replay_off=state.reasoning_replay_off)


def wants_split(state: State) -> bool:
    """A compression asked the session to go on in a child, and no turn is open (rules 3)."""
    settings = state.settings
    return (settings is not None and settings.rule_set.context_management
            and state.context.split_pending is not None
            and (state.turn is None or state.turn.finished is not None))


def window_to_probe(state: State) -> ProbeWindow | None:
    """The primary model's window is asked once per session (rules 3), unless configured."""
    settings = state.settings
    assert settings is not None
    entry = settings.chain[0]
    known = any((w.provider, w.model) == (entry.provider, entry.model)
                for w in state.context.windows)
    if not settings.rule_set.context_management or settings.context_length is not None \
            or known:
        return None
    return ProbeWindow(provider=entry.provider, model=entry.model, base_url=entry.base_url)


def _completed_answer(state: State) -> str | None:
    finished = state.turn.finished if state.turn is not None else None
    if finished is None or not finished.completed or not finished.final_response:
        return None
    return finished.final_response
