"""The decision rules a session runs under, as one frozen value of named behaviours.

A change of what the stages decide (so that an old log would no longer replay) bumps ``RULES``
and adds a flag here, true from that version on; the stages read the flag
(``config.rule_set.tool_checks``), never the number. A session records its version
(``SessionSettings.rules``) and old sessions are upcast to the version they ran under
(``stages.log.upcast``), so each log replays under the rules that wrote it.

Every flag names the newer behaviour, so each is false up to some version and true after it:
a new version only adds behaviours (``tests/stages/test_rules.py`` pins the table).
"""

from __future__ import annotations

from typing import Any

import attrs

RULES = 9
"""The version of the decision rules a new session runs under."""


def _since(version: int) -> Any:
    return attrs.field(metadata={"since": version})


@attrs.frozen(kw_only=True)
class RuleSet:
    """The behaviours of one version of the rules; one shared value per version (``rule_set``)."""

    version: int
    # --- 2 ---
    # The retry budget counts failures of one model call (under 1: of the whole turn).
    retries_per_call: bool = _since(2)
    # ``model_requested`` carries the request's digest; replay compares it (under 1: counts).
    request_digest: bool = _since(2)
    # Calls of a reply cut at the output limit are rejected as truncated, none runs.
    cut_calls_rejected: bool = _since(2)
    # An abandoned turn rejects its pending calls before it closes.
    abandoned_calls_rejected: bool = _since(2)
    # --- 3 ---
    # The tool plan repairs calls, answers duplicates, runs same-path calls in order, and
    # blocks or asks approval for dangerous commands (``tool_call_repaired``,
    # ``approval_answered``; ``stages.tools.checks``).
    tool_checks: bool = _since(3)
    # The system prompt is assembled from layers (identity or ``SOUL.md``, platform, tools,
    # skills, context files, memory) scanned for injection (``stages.prompt.system``).
    assembled_prompt: bool = _since(3)
    # Context files of the subdirectories tool calls reach join their results.
    subdirectory_hints: bool = _since(3)
    # An external memory provider recalls for every turn, fenced into the user's message.
    memory_recall: bool = _since(3)
    # The window is always known (table, probe, config): preflight, between-turns check,
    # compression (manual, on overflow), the log split after it and the pressure note.
    context_management: bool = _since(3)
    # The iteration budget's prompt is a note of the request, not a message of the history.
    budget_note: bool = _since(3)
    # A reply cut at the output limit is continued (the answer joins the parts) and an empty
    # reply is asked again once.
    early_end_retry: bool = _since(3)
    # A content-filter stop ends the turn as failed, not completed.
    content_filter_fails: bool = _since(3)
    # --- 4 ---
    # A reply cut at the output limit with only reasoning ends the turn
    # (``thinking_budget_exhausted``).
    thinking_only_ends: bool = _since(4)
    # Requests carry the session's ``prompt_cache_key``, the replay-reasoning switch and the
    # turn's own reasoning setting.
    turn_reasoning: bool = _since(4)
    # A thinking-signature or encrypted-reasoning failure resends without replayed reasoning
    # (``strip_reasoning`` once a turn, ``stop_reasoning_replay`` for the session).
    reasoning_recovery: bool = _since(4)
    # --- 5 ---
    # A continuation that starts the answer over replaces the parts before it and is not
    # continued again (``incomplete_response``, or the next provider).
    restart_replaces_answer: bool = _since(5)
    # The embedded local model continues a cut reply from its own text (a prefilled
    # assistant message), not from a user message asking it to.
    local_prefill: bool = _since(5)
    # --- 6 ---
    # The parts of an answer cut at the output limit are joined with a space where the text
    # shows a word boundary, and the model is asked to begin with one where it stopped
    # between two words (``stages.turn.seams``).
    spaced_continuations: bool = _since(6)
    # An answer still cut at the output limit when the call budget ran out (on continuations)
    # is partial: ``incomplete_response``, not completed.
    cut_answer_partial: bool = _since(6)
    # --- 7 ---
    # Before the first tool batch of a turn that holds a call changing the working tree, the
    # turn asks for a checkpoint of the tree (``TakeCheckpoint``, ``Checkpointed``).
    checkpoints: bool = _since(7)
    # Dangerous commands are read with a shell parser (``stages.tools.shell``): quotes,
    # backslashes, variables, substitutions, ``sh -c``, ``eval``, pipes into a shell and
    # interpreter code are seen; under 3 to 6, a table of regular expressions.
    shell_parser_check: bool = _since(7)
    # Where no OS sandbox could start (``SandboxProbed``), the tool plan asks before every
    # terminal command that is not plainly read-only, unless the session runs in full access
    # or allows unconfined commands (``stages.tools.unconfined``).
    unconfined_asks: bool = _since(7)
    # Tool results are sent as data between the session's markers, the system prompt says
    # that instructions never come from them, and a result the scan flags carries a warning
    # line (``stages.prompt.untrusted``).
    untrusted_marked: bool = _since(7)
    # Context files, hints, skills and memory are scanned by the wider scan too
    # (paraphrases, other languages, encoded payloads: ``stages.prompt.injection_wide``).
    wide_injection_scan: bool = _since(7)
    # Compression keeps going inside one turn: the latest user message is kept apart from the
    # middle (``CompressionPlanned.kept``), the calls after it are summarised too, and the
    # updated summary replaces the previous one wherever it stood (``stages.context.apply``).
    iterative_compression: bool = _since(7)
    # --- 8 ---
    # A compression that takes the latest todo list out of the history (the tool's last
    # result, or a previous summary's copy) ends the summary with it (``stages.context.tasks``).
    todo_in_summary: bool = _since(8)
    # The calls of a batch that runs in sequence are planned one at a time (``ToolsPlanned`` per
    # call), so a process killed during one call leaves the later ones "never started", not
    # "started, outcome unknown" (``stages.tools.plan``).
    sequential_one_by_one: bool = _since(8)
    # A turn offers the caller's own tools (``TurnStarted.client_tools``) next to the
    # session's; a reply calling one ends the turn once the session's calls have run
    # (``client_tool_calls``), and the next turn goes on from the caller's results
    # (``TurnStarted.tool_results``).
    client_tools: bool = _since(8)
    # A call that needs approval may end the turn waiting (``approvals_pending``); the turn
    # goes on when the decisions come (``approvals_decided``), and a denial's reason reaches
    # the model with the refusal (``stages.tools.approvals``).
    paused_approvals: bool = _since(8)
    # A tool declared as needing approval (``ToolSpec.requires_approval``) asks before it runs.
    declared_approvals: bool = _since(8)
    # A message steered into a running turn joins it at the next step boundary (``steered``).
    steering: bool = _since(8)
    # A call refused because an image is too large is retried with the history's images
    # replaced by a note naming each one (``RecoveryDecided`` action ``drop_images``).
    image_recovery: bool = _since(8)
    # An overflow teaches the window its refusal names in Anthropic's and llama.cpp's words
    # too, not only OpenAI's: before, a tenth under the failed request's estimate was learned,
    # and a long turn compressed about twice as often (``stages.log.context_tokens``).
    named_window_limits: bool = _since(8)
    # --- 9 ---
    # A middle is summarised only when it is larger than a summary message holding the
    # shortest useful summary: before, a middle of a few short messages was replaced by a
    # longer summary and the history grew (``stages.context.engine``).
    summary_must_shrink: bool = _since(9)
    # A session recording tokens whose chain speaks Anthropic's Messages API, which returns no
    # logprobs, is told so once, at its first model call (a ``ContextNotice``, a turn warning;
    # ``stages.turn.token_note``).
    token_notes: bool = _since(9)


def _build(version: int) -> RuleSet:
    flags = {a.name: version >= a.metadata["since"]
             for a in attrs.fields(RuleSet) if "since" in a.metadata}
    return RuleSet(version=version, **flags)


_SETS = tuple(_build(version) for version in range(1, RULES + 1))


def rule_set(version: int) -> RuleSet:
    """The rules of ``version``, one shared value per version; a version this code does not
    know (older than 1, newer than ``RULES``) is refused, never run under other rules."""
    if not 1 <= version <= RULES:
        raise ValueError(f"unknown rules version {version} (this code knows 1 to {RULES})")
    return _SETS[version - 1]
