"""The event types: every transition and every effect result of a session.

Events are frozen, keyword-only attrs classes of plain data. Each class is the one place that
declares its event: a stable ``kind``, a ``schema_version``, whether it is ``observed``, and
which fields hold outside text to redact (``metadata=REDACTED``). Two families:

* observations (``observed``): results of effects or input from outside — replay serves them
  from the log instead of performing the effect;
* decisions: produced by pure stages — replay re-derives them and compares with the log.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import attrs

from stages.log.api_mode import API_MODES
from stages.log.content_parts import ImagePart
from stages.log.credential_pool import STRATEGIES as CREDENTIAL_STRATEGIES
from stages.log.messages import Message, ToolCall
from stages.log.output_spec import OUTPUT_MODES, OutputSpec
from stages.log.pause_events import (
    APPROVAL_CHOICES as APPROVAL_CHOICES,  # re-exported: the approvers and tests use it
)
from stages.log.pause_events import (
    REDACTED,
    ApprovalAnswered,
    ApprovalsDecided,
    ApprovalsPending,
    Steered,
)
from stages.log.reasoning_parts import check_budget, check_effort
from stages.log.rules import RULES, RuleSet, rule_set
from stages.log.setting_checks import (
    as_names,
    flag,
    fraction,
    known_rules,
    name_or_none,
    name_patterns,
    one_of,
    seconds_or_more,
    whole,
)
from stages.log.tokens import ReplyTokens
from stages.log.tool_specs import ToolOutcome, ToolSpec

"""Field metadata: the field holds free text from outside (a user, a model, a tool, a provider)
and is redacted before the event reaches the log (``stages.log.redact.redact_event``)."""


CACHE_TTLS = ("5m", "1h")
PLATFORMS = ("cli", "gateway", "cron", "api")
# The provider name of a llama.cpp server: the embedded one, or one of the caller's own.
LOCAL_PROVIDER = "local"
SYSTEM_MESSAGE_MODES = ("append", "replace")
# How the commands a tool runs are confined (``effects.tools.sandbox``): the file system read-only
# (but for the working tree in workspace-write), or not confined at all (asked for by name).
SANDBOX_MODES = ("read-only", "workspace-write", "full-access")
# The environment variables a tool's commands do not get, by name (case-insensitive patterns):
# Codex's defaults for ``shell_environment_policy``, so that a key exported in the user's shell
# is not one ``env`` away from the model (``effects.tools.environment``).
ENV_EXCLUDE = ("*KEY*", "*SECRET*", "*TOKEN*")


def _optional_text(value: object) -> str | None:
    """Providers send error codes as text or numbers (llama.cpp, OpenRouter, vLLM): the log
    keeps them as text."""
    return None if value is None else str(value)


@attrs.frozen(kw_only=True)
class Usage:
    """Token usage in the provider-neutral shape."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    # The reply reasoned, and the provider counted its reasoning inside ``output_tokens``
    # without saying how many (Anthropic): ``reasoning_tokens`` is then not a count.
    reasoning_in_output: bool = False

    @property
    def total_tokens(self) -> int:
        """Everything billed: uncached input, cache reads and writes, and output."""
        return (self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
                + self.output_tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            reasoning_in_output=self.reasoning_in_output or other.reasoning_in_output,
        )

    def as_dict(self) -> dict[str, int | None]:
        """The counts and ``total_tokens``; ``reasoning_tokens`` is None when some reasoning
        was counted inside ``output_tokens`` without a count of its own (not reported, not
        0)."""
        # Written out (in the fields' order): attrs.asdict reads the fields through a dozen
        # calls, and every turn's result asks for this.
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens,
                "reasoning_tokens": None if self.reasoning_in_output else self.reasoning_tokens,
                "total_tokens": self.total_tokens}


@attrs.frozen(kw_only=True)
class ProviderEntry:
    """One provider of the chain. ``credentials`` are labels of pooled keys (the names of the
    environment variables holding them); the keys themselves never reach the log."""

    provider: str
    model: str
    base_url: str | None = None
    api_mode: str = attrs.field(default="chat_completions", validator=one_of(API_MODES, named=True))
    credentials: tuple[str, ...] = ()
    # This model's window, when known better than the table (rules 3).
    context_length: int | None = attrs.field(default=None, validator=whole(1, optional=True))
    # How hard the model reasons: an effort, or a token budget (stages.recovery.reasoning).
    reasoning_effort: str | None = attrs.field(default=None, validator=check_effort)
    reasoning_budget: int | None = attrs.field(default=None, validator=check_budget)


@attrs.frozen(kw_only=True)
class SessionSettings:
    """Everything about the session that stages decide from, recorded once at its start.
    Validated when built, so a setting no stage can follow never reaches the log."""

    model: str
    provider: str
    base_url: str | None = None
    api_mode: str = attrs.field(default="chat_completions", validator=one_of(API_MODES, named=True))
    max_turns: int = attrs.field(default=500, validator=whole(1))
    max_tokens: int | None = attrs.field(default=None, validator=whole(1, optional=True))
    context_length: int | None = attrs.field(default=None, validator=whole(1, optional=True))
    stream: bool = True
    identity: str | None = None
    preflight_threshold: float = attrs.field(default=0.5, validator=fraction)
    compression_enabled: bool = True
    protect_last_n: int = 20
    # "auto" (None), "none", "required", or a tool name the model must call.
    tool_choice: str | None = None
    api_mode_reason: str = "default"
    credentials: tuple[str, ...] = ()
    credential_strategy: str = attrs.field(default="round_robin",
                                           validator=one_of(CREDENTIAL_STRATEGIES, named=True))
    # A refresh hook is configured: a key's first auth failure tries it before resting the key.
    credential_refresh: bool = False
    fallback_providers: tuple[ProviderEntry, ...] = ()
    max_retries: int = attrs.field(default=3, validator=whole(0))
    retry_base_delay: float = attrs.field(default=2.0, validator=seconds_or_more)
    rate_limit_cooldown: float = attrs.field(default=60.0, validator=seconds_or_more)
    billing_cooldown: float = attrs.field(default=3600.0, validator=seconds_or_more)
    prompt_caching: bool = True
    cache_ttl: str = attrs.field(default="5m", validator=one_of(CACHE_TTLS))
    # The version of the decision rules the session runs under (``stages.log.rules``).
    rules: int = attrs.field(default=RULES, validator=known_rules)
    # Smart routing (off when None): simple turns go to this cheaper model (stages.turn.routing).
    cheap_model: ProviderEntry | None = None
    # Prompt assembly (rules 3): where the agent runs, whether the caller's system message adds
    # to the assembled prompt or replaces it, and whether identity, context files, skills and
    # memory are read from disk at session start.
    platform: str = attrs.field(default="cli", validator=one_of(PLATFORMS))
    system_message_mode: str = attrs.field(default="append",
                                           validator=one_of(SYSTEM_MESSAGE_MODES))
    load_context: bool = False
    # The external memory provider asked to recall for every turn (None: none).
    memory_provider: str | None = None
    # Context management (rules 3): the between-turns check, the engine, the summary's model
    # (None: the session's own).
    between_turns_threshold: float = attrs.field(default=0.85, validator=fraction)
    context_engine: str = "compressor"
    summary_model: str | None = None
    # The primary provider's reasoning: an effort, or a token budget (stages.recovery.reasoning).
    reasoning_effort: str | None = attrs.field(default=None, validator=check_effort)
    reasoning_budget: int | None = attrs.field(default=None, validator=check_budget)
    # The OS sandbox of tool commands, whether they may reach the network, and whether commands
    # may run unconfined without a question where no sandbox can start (rules 7).
    sandbox: str = attrs.field(default="workspace-write", validator=one_of(SANDBOX_MODES))
    network: bool = attrs.field(default=False, validator=flag)
    allow_unconfined: bool = attrs.field(default=False, validator=flag)
    # The environment of tool commands: the variables they do not get, and those they get even
    # so (the patterns of ``env_exclude`` name keys; ``env_keep`` lets ``GH_TOKEN`` through).
    env_exclude: tuple[str, ...] = attrs.field(default=ENV_EXCLUDE, converter=as_names,
                                               validator=name_patterns)
    env_keep: tuple[str, ...] = attrs.field(default=(), converter=as_names,
                                            validator=name_patterns)
    # Structured output: how many times an answer that does not match the turn's output type
    # is sent back with the validation error; ``tool`` always asks for it through the
    # final-answer tool (a provider without structured output), ``auto`` natively when the
    # request has no tools.
    output_retries: int = attrs.field(default=2, validator=whole(0))
    output_mode: str = attrs.field(default="auto", validator=one_of(OUTPUT_MODES))
    # Ask the provider for the reply's token ids and logprobs and the prompt's tokenisation,
    # recorded on each reply for token-level RL export (docs/token-samples.md).
    record_tokens: bool = attrs.field(default=False, validator=flag)
    # The tokenizer (a Hugging Face name or folder, or a .gguf file) that tokenises the prompt
    # and names the ids of a reply whose provider names none, when recording tokens.
    tokenizer: str | None = attrs.field(default=None, validator=name_or_none)

    @functools.cached_property
    def chain(self) -> tuple[ProviderEntry, ...]:
        """The primary provider, then the fallbacks in order (made once per settings value:
        the stages ask for it several times per model call)."""
        primary = ProviderEntry(provider=self.provider, model=self.model, base_url=self.base_url,
                                api_mode=self.api_mode, credentials=self.credentials,
                                reasoning_effort=self.reasoning_effort,
                                reasoning_budget=self.reasoning_budget)
        return (primary, *self.fallback_providers)

    @functools.cached_property
    def rule_set(self) -> RuleSet:
        """The behaviours of ``rules``, read by the stages on every decision (one attribute
        load once made, as cheap as comparing the number)."""
        return rule_set(self.rules)

    @functools.cached_property
    def needs_clock(self) -> bool:
        """Cooldowns need the time; a single key with no fallback has nothing to cool down
        (asked on every model call, of a value that never changes)."""
        return bool(self.fallback_providers) or any(e.credentials for e in self.chain)


# --- observations -----------------------------------------------------------------------------

@attrs.frozen(kw_only=True)
class SessionStarted:
    kind: ClassVar[str] = "session_started"
    schema_version: ClassVar[int] = 3
    observed: ClassVar[bool] = True
    session_id: str
    started_at: str
    settings: SessionSettings
    parent_session_id: str | None = None
    # Rules 7: the code of the markers around tool results (``stages.prompt.untrusted``),
    # drawn from the id when the session starts; a fork repeats its origin's start, so its
    # records before the fork stay the origin's.
    data_boundary: str | None = None


@attrs.frozen(kw_only=True)
class SessionResumed:
    """A process reopened the session; it continues with these settings (maybe another model)."""

    kind: ClassVar[str] = "session_resumed"
    schema_version: ClassVar[int] = 3
    observed: ClassVar[bool] = True
    resumed_at: str
    settings: SessionSettings


@attrs.frozen(kw_only=True)
class ToolsDeclared:
    kind: ClassVar[str] = "tools_declared"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    tools: tuple[ToolSpec, ...]


@attrs.frozen(kw_only=True)
class HistoryLoaded:
    """The caller passed a conversation history that replaces the session's own."""

    kind: ClassVar[str] = "history_loaded"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    messages: tuple[Message, ...] = attrs.field(metadata=REDACTED)


@attrs.frozen(kw_only=True)
class TurnStarted:
    kind: ClassVar[str] = "turn_started"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    turn_id: str
    task_id: str
    started_at: str
    user_message: str = attrs.field(metadata=REDACTED)
    system_message: str | None = attrs.field(default=None, metadata=REDACTED)
    # This turn's own reasoning setting, over the provider's (rules 4).
    reasoning_effort: str | None = attrs.field(default=None, validator=check_effort)
    reasoning_budget: int | None = attrs.field(default=None, validator=check_budget)
    # The schema this turn's final answer must match (structured output), if any.
    output: OutputSpec | None = None
    # Rules 8: tools the caller runs itself (a gateway's client), offered next to the
    # session's own for this turn; a call to one ends the turn (``client_tool_calls``).
    client_tools: tuple[ToolSpec, ...] = ()
    # Rules 8: the caller's results of the client calls the last turn ended on; the turn
    # goes on from them (``user_message`` is then empty and no user message is added).
    tool_results: tuple[Message, ...] = attrs.field(default=(), metadata=REDACTED)
    # Images sent with the message: references to the home's blob store, or URLs.
    images: tuple[ImagePart, ...] = attrs.field(default=(), metadata=REDACTED)


@attrs.frozen(kw_only=True)
class ModelReplied:
    kind: ClassVar[str] = "model_replied"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    message: Message = attrs.field(metadata=REDACTED)
    finish_reason: str
    usage: Usage
    model: str
    latency_ms: float
    streamed: bool = False
    # x-ratelimit-* response headers, lower-cased, as sent.
    rate_limits: tuple[tuple[str, str], ...] = ()
    # The call's tokens and logprobs, when the session records them (``record_tokens``).
    tokens: ReplyTokens | None = attrs.field(default=None, metadata=REDACTED)


@attrs.frozen(kw_only=True)
class ModelFailed:
    kind: ClassVar[str] = "model_failed"
    schema_version: ClassVar[int] = 2
    observed: ClassVar[bool] = True
    error_type: str
    message: str = attrs.field(metadata=REDACTED)
    status: int | None = None
    latency_ms: float = 0.0
    code: str | None = attrs.field(default=None, converter=_optional_text)
    body: str | None = attrs.field(default=None, metadata=REDACTED)
    retry_after: float | None = None
    rate_limits: tuple[tuple[str, str], ...] = ()
    # Part of a streamed answer had already reached the user when the call failed.
    partial: bool = False


@attrs.frozen(kw_only=True)
class ToolRan:
    kind: ClassVar[str] = "tool_ran"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    outcome: ToolOutcome = attrs.field(metadata=REDACTED)


@attrs.frozen(kw_only=True)
class ClockRead:
    kind: ClassVar[str] = "clock_read"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    epoch: float


@attrs.frozen(kw_only=True)
class Waited:
    """A backoff sleep before a retry; ``jitter`` was drawn in the effects layer."""

    kind: ClassVar[str] = "waited"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    seconds: float
    jitter: float


@attrs.frozen(kw_only=True)
class CredentialRefreshed:
    kind: ClassVar[str] = "credential_refreshed"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    credential_id: str
    refreshed: bool


@attrs.frozen(kw_only=True)
class TurnAborted:
    """The turn stopped on an exception in this process (Ctrl-C, a bug, a failed write)."""

    kind: ClassVar[str] = "turn_aborted"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    error: str


@attrs.frozen(kw_only=True)
class Interrupted:
    kind: ClassVar[str] = "interrupted"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    during: str
    message: str | None = attrs.field(default=None, metadata=REDACTED)


# --- decisions --------------------------------------------------------------------------------

@attrs.frozen(kw_only=True)
class SystemPromptSet:
    kind: ClassVar[str] = "system_prompt_set"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    text: str


@attrs.frozen(kw_only=True)
class ContextPressure:
    kind: ClassVar[str] = "context_pressure"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    estimated_tokens: int
    threshold_tokens: int
    # Rules 3: why the check ran (preflight, tool_batch, between_turns), and the window used.
    reason: str = "preflight"
    window: int = 0
    window_source: str = ""


@attrs.frozen(kw_only=True)
class BudgetExhausted:
    """The iteration budget is used up; the fold appends ``prompt`` as a user message."""

    kind: ClassVar[str] = "budget_exhausted"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    api_calls: int
    max_turns: int
    prompt: str


@attrs.frozen(kw_only=True)
class ModelRequested:
    kind: ClassVar[str] = "model_requested"
    schema_version: ClassVar[int] = 2
    observed: ClassVar[bool] = False
    call_index: int
    purpose: str
    model: str
    provider: str
    message_count: int
    tool_count: int
    estimated_tokens: int
    # SHA-256 of the canonical request sent (``stages.turn.request.request_digest``); None in logs
    # written before digests (rules 1), where replay compares the counts only.
    digest: str | None = None


@attrs.frozen(kw_only=True)
class CredentialSelected:
    kind: ClassVar[str] = "credential_selected"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    provider_index: int
    credential_id: str


@attrs.frozen(kw_only=True)
class RecoveryDecided:
    """What a failed call leads to: ``retry`` (after a backoff), ``refresh`` (the key's refresh
    hook, then the same key), ``rotate`` (another key), ``fallback`` (the next provider),
    ``drop_images`` (the history's images replaced by notes, rules 8), or ``fail``. ``at`` is
    the time the cooldowns are counted from."""

    kind: ClassVar[str] = "recovery_decided"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    reason: str
    action: str
    detail: str
    attempt: int = 0
    at: float = 0.0
    retry_after: float | None = None
    credential_id: str | None = None
    provider_index: int = 0


@attrs.frozen(kw_only=True)
class ContinuationRequested:
    """The reply was incomplete (reasoning only, or cut short): ask the model to go on."""

    kind: ClassVar[str] = "continuation_requested"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    prompt: str
    # incomplete, length (cut at the output limit), empty (rules 3), or output (the answer did
    # not match the turn's output type: the prompt holds the validation errors).
    why: str = "incomplete"


@attrs.frozen(kw_only=True)
class ToolCallRejected:
    """A call that never reaches a tool: the fold appends ``content`` as its tool result."""

    kind: ClassVar[str] = "tool_call_rejected"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    call: ToolCall
    reason: str
    content: str


@attrs.frozen(kw_only=True)
class ToolsPlanned:
    kind: ClassVar[str] = "tools_planned"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    call_ids: tuple[str, ...]
    concurrent: bool


@attrs.frozen(kw_only=True)
class TurnFinished:
    """The turn ended. ``note`` is an assistant message the fold appends to keep alternation
    when the turn ended without a reply (interrupted, failed, abandoned)."""

    kind: ClassVar[str] = "turn_finished"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    exit_reason: str
    final_response: str | None
    completed: bool
    failed: bool = False
    interrupted: bool = False
    error: str | None = None
    note: str | None = None


@attrs.frozen(kw_only=True)
class OutputChecked:
    """The turn's answer checked against its output type (an effect: the caller's type may
    have validators of its own). ``output`` is the validated value as canonical JSON, or
    ``errors`` says why it does not match."""

    kind: ClassVar[str] = "output_checked"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    valid: bool
    output: str | None = attrs.field(default=None, metadata=REDACTED)
    errors: str | None = attrs.field(default=None, metadata=REDACTED)


# --- tool calls: repairs and approvals (rules 3) ----------------------------------------------

@attrs.frozen(kw_only=True)
class ToolCallRepaired:
    """The model's call, fixed where its intent was clear; the fold replaces the pending call."""

    kind: ClassVar[str] = "tool_call_repaired"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    call_id: str
    name: str
    arguments: str
    repairs: tuple[str, ...]


@attrs.frozen(kw_only=True)
class RouteChosen:
    """Smart routing's choice for the turn: ``cheap`` (the settings' cheap model) or
    ``primary``, and why."""

    kind: ClassVar[str] = "route_chosen"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    route: str
    reason: str
    model: str


# --- prompt inputs, context files, hints (rules 3) ---------------------------------------------

@attrs.frozen(kw_only=True)
class SkillCard:
    """A skill as its ``SKILL.md`` frontmatter describes it (the body is loaded on demand)."""

    name: str
    description: str
    category: str = "general"
    platforms: tuple[str, ...] = ()
    requires_tools: tuple[str, ...] = ()
    fallback_for_tools: tuple[str, ...] = ()
    path: str = ""


@attrs.frozen(kw_only=True)
class PromptInputsRead:
    """What the prompt is assembled from, read at session start (and after compression):
    ``identity`` is ``SOUL.md``; ``context_files`` and ``memory`` are (name, text) pairs."""

    kind: ClassVar[str] = "prompt_inputs_read"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    cwd: str | None = None
    identity: str | None = attrs.field(default=None, metadata=REDACTED)
    context_files: tuple[tuple[str, str], ...] = attrs.field(default=(), metadata=REDACTED)
    memory: tuple[tuple[str, str], ...] = attrs.field(default=(), metadata=REDACTED)
    skills: tuple[SkillCard, ...] = ()


@attrs.frozen(kw_only=True)
class HintsRead:
    """Directories the tool calls reached were checked for a context file: ``dirs`` are all
    the checked ones (each is checked once a session), ``files`` the (name, text) found."""

    kind: ClassVar[str] = "hints_read"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    dirs: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = attrs.field(default=(), metadata=REDACTED)


@attrs.frozen(kw_only=True)
class MemoryPrefetched:
    """What the memory providers recalled for the turn: (provider, text); ``failed`` names the
    providers that failed or timed out."""

    kind: ClassVar[str] = "memory_prefetched"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    results: tuple[tuple[str, str], ...] = attrs.field(default=(), metadata=REDACTED)
    failed: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ContextNotice:
    """Content meant for the prompt was blocked (prompt injection) or truncated; the user is
    told (``TurnResult.warnings``)."""

    kind: ClassVar[str] = "context_notice"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    source: str
    name: str
    detail: str


@attrs.frozen(kw_only=True)
class HintAttached:
    """A subdirectory's context file joins the result of the call that reached it."""

    kind: ClassVar[str] = "hint_attached"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    call_id: str
    text: str
# --- the OS sandbox (rules 7) -------------------------------------------------------------------

@attrs.frozen(kw_only=True)
class SandboxProbed:
    """Whether the OS sandbox starts in this process for the session's mode, asked once at
    each opening (``confined`` is false in full access). Where it does not start, the tool plan
    asks before every command that is not plainly read-only (``stages.tools.unconfined``)."""

    kind: ClassVar[str] = "sandbox_probed"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    mode: str
    confined: bool
    detail: str = ""


# --- context management (rules 3) -------------------------------------------------------------

@attrs.frozen(kw_only=True)
class ContextWindowProbed:
    """The provider's own answer to how large the model's window is, and where it came from."""

    kind: ClassVar[str] = "context_window_probed"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    provider: str
    model: str
    tokens: int
    source: str


@attrs.frozen(kw_only=True)
class CompressionPlanned:
    """What compression keeps: ``head`` messages, then (from ``tail_start``) the rest; the
    middle in between is summarised (``summarise``) or dropped. ``pruned`` tool results after
    the middle become one-line summaries, ``cut`` ones (larger than the window allows) are cut
    with a marker.

    Rules 7 (``iterative``): the latest user message at ``kept`` stays although it lies between
    ``head`` and ``tail_start``, and a previous summary is taken out of every kept message, so
    that the history holds one summary, the updated one."""

    kind: ClassVar[str] = "compression_planned"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    reason: str
    estimated_tokens: int
    window: int
    message_count: int
    head: int
    tail_start: int
    pruned: tuple[int, ...] = ()
    cut: tuple[int, ...] = ()
    cut_chars: int = 0
    summarise: bool = True
    summary_budget: int = 0
    at: float = 0.0
    kept: int | None = None
    iterative: bool = False


@attrs.frozen(kw_only=True)
class ContextSummarised:
    kind: ClassVar[str] = "context_summarised"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    text: str = attrs.field(metadata=REDACTED)
    model: str
    usage: Usage = Usage()
    latency_ms: float = 0.0


@attrs.frozen(kw_only=True)
class SummaryFailed:
    kind: ClassVar[str] = "summary_failed"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    error_type: str
    message: str = attrs.field(metadata=REDACTED)


@attrs.frozen(kw_only=True)
class ContextCompressed:
    """The fold replaces the history by the plan's head, the summary (or a marker when the
    summary failed) and the kept messages."""

    kind: ClassVar[str] = "context_compressed"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = False
    # The summary kept for the next update, and the text that replaced the middle (the
    # summary, or a marker when none could be written; None: nothing was in the middle).
    summary: str | None
    inserted: str | None
    before_tokens: int
    after_tokens: int
    cooldown_until: float | None = None
    disabled: bool = False
    notice: str | None = None


@attrs.frozen(kw_only=True)
class SessionSplit:
    """The session goes on in a child session (compression starts one); this log ends here."""

    kind: ClassVar[str] = "session_split"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    child_session_id: str
    reason: str


@attrs.frozen(kw_only=True)
class ContextInherited:
    """A child session's start: its parent's compressed history and context state."""

    kind: ClassVar[str] = "context_inherited"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    parent_session_id: str
    reason: str
    messages: tuple[Message, ...] = attrs.field(metadata=REDACTED)
    summary: str | None = attrs.field(default=None, metadata=REDACTED)
    compressions: int = 0
    ineffective: int = 0
    disabled: bool = False
    cooldown_until: float | None = None
    windows: tuple[ContextWindowProbed, ...] = ()
    window_cap: int | None = None
    # What the session already settled: kinds of command approved for the session, and the
    # directories checked for subdirectory hints.
    approved_patterns: tuple[str, ...] = ()
    hint_dirs: tuple[str, ...] = ()
    # Rules 4: the provider could not read replayed encrypted reasoning; the child must not
    # send it again either.
    reasoning_replay_off: bool = False


# --- forks (issue 12) ---------------------------------------------------------------------------

@attrs.frozen(kw_only=True)
class SessionForked:
    """This session is a fork: the records before it repeat ``origin_session_id``'s first
    ``origin_seq`` records (under this session's id), and from here it goes on with
    ``settings`` (maybe another model or policy). Recorded where the fork's own decisions
    begin, between turns or inside the turn the fork continues."""

    kind: ClassVar[str] = "session_forked"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    origin_session_id: str
    origin_seq: int
    forked_at: str
    settings: SessionSettings


# --- a compression the user asks for between turns (``/compress`` in the chat) ---------------

@attrs.frozen(kw_only=True)
class CompressionRequested:
    """The user asked to compress the context now, between turns: the compression stages run
    as under pressure (``reason="manual"``), the session then continues in a child. A summary
    cooldown (after a failed summary) no longer holds."""

    kind: ClassVar[str] = "compression_requested"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    requested_at: str


# --- checkpoints of the working tree (issue 23) ----------------------------------------------

@attrs.frozen(kw_only=True)
class Checkpointed:
    """The working tree ``tree`` was snapshotted before turn ``turn`` (1-based, in this
    session's log) first changed it: ``commit`` in the shadow repository of the tree, holding
    ``files`` files (``skipped`` were over the size cap). A checkpoint that failed has no
    commit and says why (``error``); the turn went on."""

    kind: ClassVar[str] = "checkpointed"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    turn: int
    tree: str
    commit: str | None = None
    files: int = 0
    skipped: int = 0
    error: str | None = None


@attrs.frozen(kw_only=True)
class TreeRestored:
    """The working tree was put back to ``commit`` (the checkpoint of ``turn``) between turns;
    what it held before was saved first as ``saved``, so a rollback can be undone. A rollback
    that failed has no ``saved`` and says why (``error``)."""

    kind: ClassVar[str] = "tree_restored"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    turn: int | None = None
    tree: str | None = None
    commit: str | None = None
    saved: str | None = None
    removed: int = 0
    restored: int = 0
    error: str | None = None


Event = (SessionStarted | SessionResumed | ToolsDeclared | HistoryLoaded | TurnStarted
         | ModelReplied | ModelFailed | ToolRan | ClockRead | Waited | CredentialRefreshed
         | TurnAborted | Interrupted | SystemPromptSet | ContextPressure | BudgetExhausted
         | ModelRequested | CredentialSelected | RecoveryDecided | ContinuationRequested
         | ToolCallRejected | ToolsPlanned | TurnFinished | ToolCallRepaired | ApprovalAnswered
         | RouteChosen | PromptInputsRead | HintsRead | ContextNotice | HintAttached
         | MemoryPrefetched | ContextWindowProbed
         | CompressionPlanned | ContextSummarised | SummaryFailed | ContextCompressed
         | SessionSplit | ContextInherited | SessionForked | CompressionRequested
         | Checkpointed | TreeRestored | SandboxProbed | OutputChecked | ApprovalsPending
         | ApprovalsDecided | Steered)

EVENT_TYPES: dict[str, Any] = {cls.kind: cls for cls in Event.__args__}

OBSERVED: frozenset[str] = frozenset(k for k, cls in EVENT_TYPES.items() if cls.observed)

REDACTED_FIELDS: dict[type, tuple[str, ...]] = {
    cls: names for cls in EVENT_TYPES.values()
    if (names := tuple(f.name for f in attrs.fields(cls) if f.metadata.get("redact")))
}

# Where these appear, the live process stopped the turn in progress: replay stops it there too.
TURN_CUTS: frozenset[str] = frozenset({SessionResumed.kind, TurnAborted.kind})
