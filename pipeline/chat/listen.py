"""From the session's events to what the chat shows: the agent's event listener (and each
subagent's, one level deeper) calls :class:`EventRouter`, which calls the display."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pipeline.chat.display import Display
from pipeline.chat.text import argument_summary, shorten
from pipeline.sandbox_settings import unconfined_notice
from stages.log import events as ev
from stages.log.messages import ToolCall

__all__ = ["EventRouter"]

LABEL_CHARS = 30
# How a resumed session's unfinished turn is closed (stages.turn.step.decide_abandon).
ABANDONED = "abandoned"


class EventRouter:
    def __init__(self, display: Display) -> None:
        self.display = display
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str], ToolCall] = {}
        self._streamed = False
        self._handlers: dict[type, Callable[[Any, int, str], None]] = {
            ev.TurnStarted: self._turn_started, ev.ModelRequested: self._requested,
            ev.ModelReplied: self._replied, ev.ToolsPlanned: self._planned,
            ev.ToolRan: self._ran, ev.ToolCallRejected: self._rejected,
            ev.ApprovalAnswered: self._approval, ev.Interrupted: self._interrupted,
            ev.RecoveryDecided: self._recovery, ev.ContextCompressed: self._compressed,
            ev.ContextNotice: self._context_notice, ev.SessionSplit: self._split,
            ev.TurnFinished: self._finished, ev.SandboxProbed: self._sandbox,
            ev.Steered: self._steered,
        }

    # --- the listeners ------------------------------------------------------------------------
    def parent(self, event: ev.Event) -> None:
        self._route(event, 0, "")

    def child(self, goal: str, event: ev.Event) -> None:
        """A subagent's event (``Delegation(progress=...)``), shown under its parent's call."""
        self._route(event, 1, shorten(goal, LABEL_CHARS))

    def delta(self, text: str) -> None:
        self._streamed = True
        self.display.delta(text)

    def _route(self, event: ev.Event, depth: int, label: str) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event, depth, label)

    # --- one per kind of event ----------------------------------------------------------------
    def _turn_started(self, e: ev.TurnStarted, depth: int, label: str) -> None:
        if depth:
            self.display.notice("subagent started", "dim", depth=depth, label=label)

    def _requested(self, e: ev.ModelRequested, depth: int, label: str) -> None:
        if not depth:
            self._streamed = False
            self.display.waiting()

    def _replied(self, e: ev.ModelReplied, depth: int, label: str) -> None:
        with self._lock:
            for call in e.message.tool_calls:
                self._calls[(label, call.id)] = call
        if depth:
            return
        if e.message.content and not self._streamed:
            self.display.reply_text(e.message.text)
        self.display.reply_done()

    def _planned(self, e: ev.ToolsPlanned, depth: int, label: str) -> None:
        for call_id in e.call_ids:
            with self._lock:
                call = self._calls.get((label, call_id))
            if call is not None:
                self.display.tool_started(call.name, argument_summary(call.name, call.arguments),
                                          depth=depth, label=label)

    def _ran(self, e: ev.ToolRan, depth: int, label: str) -> None:
        o = e.outcome
        with self._lock:
            self._calls.pop((label, o.call_id), None)
        self.display.tool_finished(o.name, ok=o.ok, error=o.error, duration_ms=o.duration_ms,
                                   output=o.content, depth=depth, label=label)

    def _rejected(self, e: ev.ToolCallRejected, depth: int, label: str) -> None:
        self.display.notice(f"{e.call.name} not run: {shorten(e.reason, 120)}", "warn",
                            depth=depth, label=label)

    def _approval(self, e: ev.ApprovalAnswered, depth: int, label: str) -> None:
        level = "warn" if e.choice == "deny" else "dim"
        why = f" ({e.source})" if e.source != "callback" else ""
        self.display.notice(f"approval: {e.choice}{why}", level, depth=depth, label=label)

    def _interrupted(self, e: ev.Interrupted, depth: int, label: str) -> None:
        self.display.notice(f"interrupted ({e.during.replace('_', ' ')})", "warn", depth=depth,
                            label=label)

    def _recovery(self, e: ev.RecoveryDecided, depth: int, label: str) -> None:
        self.display.notice(f"{e.action}: {shorten(e.detail or e.reason, 120)}", "dim",
                            depth=depth, label=label)

    def _compressed(self, e: ev.ContextCompressed, depth: int, label: str) -> None:
        self.display.notice(f"context compressed: {e.before_tokens:,} → {e.after_tokens:,} "
                            "tokens", depth=depth, label=label)
        if e.notice:
            self.display.notice(e.notice, "warn", depth=depth, label=label)

    def _context_notice(self, e: ev.ContextNotice, depth: int, label: str) -> None:
        self.display.notice(f"{e.source} {e.name}: {e.detail}", "warn", depth=depth, label=label)

    def _sandbox(self, e: ev.SandboxProbed, depth: int, label: str) -> None:
        if not depth and (notice := unconfined_notice(e)) is not None:
            self.display.notice(notice, "warn")

    def _steered(self, e: ev.Steered, depth: int, label: str) -> None:
        if not depth:  # the user's message typed while the turn ran is in the conversation now
            self.display.notice("↳ the steered message joins the conversation", "dim")

    def _split(self, e: ev.SessionSplit, depth: int, label: str) -> None:
        if not depth:
            self.display.notice(f"the session continues in {e.child_session_id}", "dim")

    def _finished(self, e: ev.TurnFinished, depth: int, label: str) -> None:
        if depth:
            self.display.notice(f"subagent finished: {e.exit_reason}", "dim", depth=depth,
                                label=label)
        elif e.exit_reason == ABANDONED:
            self.display.notice(f"the session's previous turn did not finish ({e.error}); it "
                                "is closed, and this one goes on from it", "warn")
        elif e.failed and e.error:
            self.display.notice(f"the turn failed: {e.error}", "error")
