"""What a stage returns: the events it decided, and optionally the loop's next step; and the
effects the turn and session machines (``stages.turn.machine``, ``stages.session.machine``)
ask the shell to perform.

``Next`` is a closed set of steps; ``Effect`` the closed set of effects. Both are plain data:
the shell maps each effect type to a performer, and a replay serves its observations instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from stages.log.content_parts import ImagePart
from stages.log.events import ApprovalAnswered, ContextInherited, Event, SessionSettings
from stages.log.messages import Message
from stages.log.output_spec import OutputSpec
from stages.log.tool_specs import ToolInvocation, ToolSpec


@attrs.frozen(kw_only=True)
class ModelRequest:
    """Everything a provider adapter needs for one call, in canonical (OpenAI) shapes."""

    model: str
    provider: str
    api_mode: str
    purpose: str
    system_prompt: str | None
    # The session's history itself (shared, never copied): any sequence of messages.
    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    stream: bool = True
    base_url: str | None = None
    # A label naming which pooled key to use; the adapter maps it to the secret.
    credential_id: str | None = None
    # "auto", "none", "required", or the name of a tool the model must call.
    tool_choice: str | None = None
    # Anthropic cache_control breakpoints: indices into ``messages``; -1 is the system prompt.
    cache_marks: tuple[int, ...] = ()
    cache_ttl: str = "5m"
    reasoning_effort: str | None = None
    # Reasoning as a token budget (Anthropic's ``budget_tokens``, OpenRouter's ``max_tokens``).
    reasoning_budget: int | None = None
    # False: send no provider-issued reasoning back (a signature failure, or unreadable
    # encrypted items); the history keeps it.
    replay_reasoning: bool = True
    # OpenAI's ``prompt_cache_key``: the session id, so its prompt cache hits across calls.
    cache_key: str | None = None
    # The provider's structured output: the answer must match this schema (None: free text,
    # or the final-answer tool is among ``tools``).
    output: OutputSpec | None = None
    # Ask for the reply's token ids and logprobs and the prompt's tokenisation (the session's
    # ``record_tokens``): the adapter records them on the reply.
    logprobs: bool = False
    # With ``logprobs``: the tokenizer the user named, which tokenises the prompt in place of
    # the server (``effects.providers.named_tokenizer``).
    tokenizer: str | None = None


@attrs.frozen(kw_only=True)
class PrepareCall:
    """Run the pre-call stages (budget, preflight, compression, routing, credentials, cache
    marks), then build the request."""


@attrs.frozen(kw_only=True)
class CallModel:
    request: ModelRequest


@attrs.frozen(kw_only=True)
class RunTools:
    calls: tuple[ToolInvocation, ...]
    concurrent: bool
    sync_first: bool


@attrs.frozen(kw_only=True)
class Wait:
    """Back off before retrying; the jitter is drawn (and recorded) by the runner."""

    attempt: int
    retry_after: float | None = None


@attrs.frozen(kw_only=True)
class RefreshCredential:
    """Run the key's refresh hook once (an effect), then call again with the same key."""

    credential_id: str


@attrs.frozen(kw_only=True)
class Finish:
    """The turn is over; the result can be read from the state."""


@attrs.frozen(kw_only=True)
class AskApproval:
    """A call waits for a person's approval (``ApprovalAnswered``), or, where the turn may
    pause (rules 8), for the decisions on ``batch``: every call of its batch that needs one
    (``ApprovalsPending``)."""

    call_id: str
    tool: str
    command: str
    pattern: str
    description: str
    # Context, not the question: two asks about the same call are the same ask.
    batch: tuple[AskApproval, ...] = attrs.field(default=(), eq=False)


@attrs.frozen(kw_only=True)
class Summarise:
    """The auxiliary call writing the compression summary (``ContextSummarised`` or
    ``SummaryFailed``)."""

    request: ModelRequest


Next = (PrepareCall | CallModel | RunTools | Wait | RefreshCredential | Finish | AskApproval
        | Summarise)


@attrs.frozen(kw_only=True)
class LoadHistory:
    """The caller's conversation history replaces the session's own (``HistoryLoaded``)."""

    messages: tuple[Message, ...]


@attrs.frozen(kw_only=True)
class BeginTurn:
    """The user's message opens a turn (``TurnStarted``); ids and the time come from effects."""

    user_message: str
    system_message: str | None = None
    task_id: str | None = None
    # This turn's own reasoning setting (rules 4).
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None
    output: OutputSpec | None = None
    # Rules 8: the caller's own tools, and its results of the calls the last turn ended on.
    client_tools: tuple[ToolSpec, ...] = ()
    tool_results: tuple[Message, ...] = ()
    # Images with the message, already stored (references) or URLs.
    images: tuple[ImagePart, ...] = ()


@attrs.frozen(kw_only=True)
class ReadClock:
    """The wall time, for cooldowns (``ClockRead``)."""


@attrs.frozen(kw_only=True)
class PollInterrupt:
    """Whether the user asked to stop (``Interrupted``, or nothing); where ``steer`` (a step
    boundary, rules 8), a message steered into the turn may join it here (``Steered``)."""

    during: str
    steer: bool = False


@attrs.frozen(kw_only=True)
class DecideApprovals:
    """The decisions on the calls a paused turn waits on (``ApprovalsDecided``), as the caller
    gave them; a replay serves them from the log."""

    answers: tuple[ApprovalAnswered, ...] = ()


@attrs.frozen(kw_only=True)
class ReadPromptInputs:
    """Read what the prompt is assembled from: identity, context files, skills, the memory
    snapshot (``PromptInputsRead``)."""


@attrs.frozen(kw_only=True)
class ReadHints:
    """Check directories the tool calls reached for a context file (``HintsRead``); names are
    given relative to ``cwd``."""

    dirs: tuple[str, ...]
    cwd: str


@attrs.frozen(kw_only=True)
class PrefetchMemory:
    """Ask the memory providers what they recall for ``query`` (``MemoryPrefetched``)."""

    query: str


@attrs.frozen(kw_only=True)
class RequestCompression:
    """Take the user's request to compress now (``CompressionRequested``)."""


@attrs.frozen(kw_only=True)
class StartSession:
    """A new session (``SessionStarted``); its id (unless given) and the time come from
    effects. ``settings`` is None where the log serves the start (replay)."""

    settings: SessionSettings | None = None
    session_id: str | None = None
    parent_session_id: str | None = None


@attrs.frozen(kw_only=True)
class ResumeSession:
    """An existing session goes on in this process (``SessionResumed``)."""

    settings: SessionSettings | None = None


@attrs.frozen(kw_only=True)
class InheritContext:
    """A split's child takes its parent's compressed context (``ContextInherited``, or
    nothing for a session that is no split's child)."""


@attrs.frozen(kw_only=True)
class DeclareTools:
    """The tools the caller brings, when they differ from the session's (``ToolsDeclared``,
    or nothing). ``tools`` is None where the log serves them (replay)."""

    tools: tuple[ToolSpec, ...] | None = None


@attrs.frozen(kw_only=True)
class RestoreTools:
    """A resumed session's toolset takes back its state (the todo list) from the history."""


@attrs.frozen(kw_only=True)
class StartMemory:
    """The memory providers learn the session they serve."""


@attrs.frozen(kw_only=True)
class ProbeWindow:
    """Ask the provider how large the model's window is (``ContextWindowProbed``, or nothing:
    a probe is a hint)."""

    provider: str
    model: str
    base_url: str | None


@attrs.frozen(kw_only=True)
class ProbeSandbox:
    """Whether the OS sandbox starts here for the session's mode (``SandboxProbed``; under
    rules 7 always, before: nothing is recorded). The performer also hands the session's policy
    to the tools that run commands."""


@attrs.frozen(kw_only=True)
class SplitSession:
    """After a compression the session goes on in a child that inherits ``context``
    (``SessionSplit``, recorded once the child's log holds its start)."""

    context: ContextInherited


@attrs.frozen(kw_only=True)
class SyncMemory:
    """The memory providers learn a completed exchange."""

    user_message: str
    answer: str


@attrs.frozen(kw_only=True)
class AbortTurn:
    """Close a turn an exception broke (``TurnAborted``)."""

    error: str


@attrs.frozen(kw_only=True)
class SwitchSettings:
    """A fork takes up its own settings (``SessionForked``, or nothing once it has)."""


@attrs.frozen(kw_only=True)
class TakeCheckpoint:
    """Snapshot the working tree before turn ``turn`` first changes it (``Checkpointed``, or
    nothing where no checkpoints are kept)."""

    turn: int


@attrs.frozen(kw_only=True)
class RestoreTree:
    """Put the working tree back to checkpoint ``commit`` of ``tree``, taken before ``turn``
    (``TreeRestored``); no commit: there is no checkpoint to go back to."""

    turn: int | None
    tree: str | None = None
    commit: str | None = None


SessionEffect = (StartSession | ResumeSession | InheritContext | DeclareTools | RestoreTools
                 | StartMemory | ProbeWindow | ProbeSandbox | SplitSession | SyncMemory
                 | AbortTurn | SwitchSettings | RestoreTree)
@attrs.frozen(kw_only=True)
class CheckOutput:
    """Check the turn's answer against its output type (``OutputChecked``)."""

    text: str
    spec: OutputSpec


Effect = (LoadHistory | BeginTurn | ReadClock | PollInterrupt | CallModel | RunTools | Wait
          | RefreshCredential | AskApproval | DecideApprovals | ReadPromptInputs | ReadHints
          | PrefetchMemory | Summarise | RequestCompression | TakeCheckpoint | CheckOutput
          | SessionEffect)


@attrs.frozen(kw_only=True)
class Decision:
    events: tuple[Event, ...] = ()
    next: Next | None = None


NOTHING = Decision()
