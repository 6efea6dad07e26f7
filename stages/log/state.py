"""Immutable session state. It is never built by hand: it is the fold of events (see fold.py)."""

from __future__ import annotations

import attrs

from stages.log.context_state import ContextState
from stages.log.credential_pool import PoolState
from stages.log.events import (
    Checkpointed,
    Interrupted,
    ModelFailed,
    ModelReplied,
    OutputChecked,
    PromptInputsRead,
    ProviderEntry,
    SandboxProbed,
    SessionSettings,
    TurnFinished,
    Usage,
)
from stages.log.history import History, as_history
from stages.log.messages import Message, ToolCall
from stages.log.output_spec import OutputSpec
from stages.log.pause_events import PendingApproval
from stages.log.ratelimits import RateLimitSnapshot
from stages.log.tool_specs import ToolSpec


# A __dict__, not slots: evolved on every event, it is copied in one dict update.
@attrs.frozen(kw_only=True, slots=False)
class TurnState:
    """What the stages need to know about the turn in progress (or the last one)."""

    index: int
    turn_id: str
    task_id: str
    system_message: str | None = None
    first_message: int = 0
    api_calls: int = 0
    usage: Usage = Usage()
    budget_exhausted: bool = False
    pending: tuple[ToolCall, ...] = ()
    # Calls whose run was planned (and made durable before a tool that changes things ran).
    planned: tuple[str, ...] = ()
    last_reply: ModelReplied | None = None
    failure: ModelFailed | None = None
    provider_index: int = 0
    credential_id: str | None = None
    # The next call keeps ``credential_id`` (a retry, or a key its hook just renewed).
    sticky_credential: bool = False
    # Failed attempts of the current model call (rules 2; per turn under rules 1).
    retries: int = 0
    continuations: int = 0
    # Empty replies retried this turn (rules 3).
    empty_retries: int = 0
    # What the memory providers returned for this turn, fenced into the prompt.
    prefetched: tuple[str, ...] = ()
    interruption: Interrupted | None = None
    finished: TurnFinished | None = None
    # Approval answers for this turn's dangerous calls: (call_id, choice, source).
    approvals: tuple[tuple[str, str, str], ...] = ()
    # Rules 8: the calls the turn waits on (it stopped for their decisions), and the reasons
    # given with denials, by call id.
    waiting: tuple[PendingApproval, ...] = ()
    denials: tuple[tuple[str, str], ...] = ()
    # Calls that ran and failed this turn, as ``call_key`` (name and canonical arguments).
    failed_calls: tuple[str, ...] = ()
    # Smart routing sent this turn to the cheap model (until a call of it fails).
    route: ProviderEntry | None = None
    # Subdirectory hints (rules 3): files read for the calls about to run, not yet attached;
    # then (call id, text) appended to those calls' results.
    hints_read: tuple[tuple[str, str], ...] = ()
    hints: tuple[tuple[str, str], ...] = ()
    # What the user is told about this turn: blocked or truncated context.
    warnings: tuple[str, ...] = ()
    # Rules 4: the turn's own reasoning setting; reasoning is no longer replayed this turn (a
    # provider rejected a replayed thinking signature).
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None
    reasoning_stripped: bool = False
    # Rules 7: the turn asked for its checkpoint of the working tree (taken or failed).
    checkpointed: bool = False
    # Structured output: the schema the answer must match, the last check of an answer, and
    # how many answers did not match.
    output: OutputSpec | None = None
    output_checked: OutputChecked | None = None
    output_failures: int = 0
    # Rules 8: the caller's own tools offered this turn (``TurnStarted.client_tools``).
    client_tools: tuple[ToolSpec, ...] = ()

    @property
    def is_open(self) -> bool:
        return self.finished is None


# A __dict__, not slots: evolved on every event, it is copied in one dict update.
@attrs.frozen(kw_only=True, slots=False)
class State:
    session_id: str | None = None
    # Rules 7: the code of the markers around tool results, as the session started with it.
    data_boundary: str | None = None
    started_at: str | None = None
    parent_session_id: str | None = None
    settings: SessionSettings | None = None
    tools: tuple[ToolSpec, ...] = ()
    system_prompt: str | None = None
    messages: History = attrs.field(factory=History, converter=as_history)
    history_chars: int = 0
    # A running SHA-256 over the history's wire text: request digests cost O(1) per call.
    history_digest: str = ""
    turns: int = 0
    turn: TurnState | None = None
    usage: Usage = Usage()
    api_calls: int = 0
    # One credential pool per provider of the chain (None: a single unpooled key).
    pools: tuple[PoolState | None, ...] = ()
    # The last clock reading; cooldowns are counted against it.
    now: float | None = None
    rate_limits: RateLimitSnapshot | None = None
    # Set when the primary was left for a rate limit or billing: later turns start on the
    # fallback until then.
    primary_rest_until: float | None = None
    provider_index: int = 0
    # Kinds of dangerous command approved for the rest of the session (``stages.tools.dangerous``).
    approved_patterns: tuple[str, ...] = ()
    # Prompt assembly (rules 3): the inputs read at session start; ``prompt_stale`` asks for
    # them to be read again (compression sets it); ``prompt_fresh`` while a new read has not
    # been built into a prompt yet; the directories checked for subdirectory hints.
    prompt_inputs: PromptInputsRead | None = None
    prompt_stale: bool = False
    prompt_fresh: bool = False
    hint_dirs: frozenset[str] = frozenset()
    context: ContextState = ContextState()
    # Rules 4: replayed encrypted reasoning was unreadable; none is replayed for the session.
    reasoning_replay_off: bool = False
    # Rules 7: the checkpoints of the working tree taken in this session, oldest first.
    checkpoints: tuple[Checkpointed, ...] = ()
    # Rules 7: whether the OS sandbox started at the session's last opening in a process.
    sandbox: SandboxProbed | None = None

    def tool(self, name: str) -> ToolSpec | None:
        for spec in self.tools:
            if spec.name == name:
                return spec
        return None

    @property
    def last_message(self) -> Message | None:
        try:  # one look-up: a turn's stages ask for it several times, on a history never empty
            return self.messages[-1]
        except IndexError:
            return None
