"""Approvals of dangerous commands and of tools declared as needing one: the effect behind
``AskApproval``.

    def ask(request: ApprovalRequest) -> str:       # "once" | "session" | "always" | "deny"
        return "once" if input(f"run {request.command}? ") == "y" else "deny"

    agent = Agent(..., approval_callback=ask)

The tool plan (a pure stage) decides that a command needs approval; the :class:`Approver`
answers, and its answer is an observation (``ApprovalAnswered``) that a replay serves from the
log without asking again. "session" approves that kind of command for the rest of the session
(the fold remembers it); "always" also adds it to ``<home>/approvals.json`` so that later
sessions do not ask. No callback (unless ``default="once"``, or ``default="pause"``: the turn
stops with the calls pending, see ``pipeline.shell.decisions``), a callback that raises or
gives no valid answer, and no answer within ``timeout`` seconds all deny. The callback blocks
the agent's thread (a terminal that asks inline wants that); pausing blocks nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import attrs

from effects.logs import get_logger
from pipeline.shell.decisions import ApprovalDecision
from stages.decision import AskApproval
from stages.errors import UsageError
from stages.log.events import APPROVAL_CHOICES, ApprovalAnswered, ApprovalsPending
from stages.tools.approvals import pending

__all__ = ["APPROVAL_TIMEOUT", "AllowList", "ApprovalCallback", "ApprovalRequest", "Approver"]

APPROVAL_TIMEOUT = 60.0
log = get_logger(__name__)


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """What the person is asked about: the command, and why it is dangerous."""

    tool: str
    command: str
    pattern: str
    description: str


ApprovalCallback = Callable[[ApprovalRequest], "str | ApprovalDecision"]


class AllowList:
    """The kinds of command approved "always", kept in a JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def patterns(self) -> frozenset[str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return frozenset()
        return frozenset(p for p in data.get("always", ()) if isinstance(p, str))

    def add(self, pattern: str) -> None:
        with self._lock:
            patterns = sorted(self.patterns() | {pattern})
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps({"always": patterns}, indent=1), encoding="utf-8")
            temporary.replace(self.path)


DEFAULTS = ("deny", "once", "pause")


class Approver:
    """``default`` answers when there is no callback: "deny" (for unattended runs, cron and
    subagents), "once" for a trusted automation that accepts the risk, or "pause": the turn
    stops with the calls pending, and goes on when someone decides (``Agent.resume``; a
    session under rules before 8 cannot pause, and denies)."""

    def __init__(self, callback: ApprovalCallback | None = None, *,
                 allowlist: AllowList | None = None, timeout: float = APPROVAL_TIMEOUT,
                 default: str = "deny") -> None:
        if default not in DEFAULTS:
            raise UsageError("the approval default must be 'deny' or 'once' (or 'pause', to "
                             f"stop the turn until someone decides), got {default!r}")
        self.callback = callback
        self.allowlist = allowlist
        self.timeout = timeout
        self.default = default

    def answer(self, ask: AskApproval, *, may_pause: bool = False
               ) -> ApprovalAnswered | ApprovalsPending:
        def answered(choice: str, source: str, reason: str | None = None) -> ApprovalAnswered:
            return ApprovalAnswered(call_id=ask.call_id, pattern=ask.pattern, choice=choice,
                                    source=source, reason=reason)

        if self.allowlist is not None and ask.pattern in self.allowlist.patterns():
            return answered("always", "allowlist")
        if self.callback is None and self.default == "pause" and may_pause:
            return ApprovalsPending(calls=pending(ask))
        if self.callback is None:
            choice = "once" if self.default == "once" else "deny"
            return answered(choice, "default", "no approval callback is configured")
        request = ApprovalRequest(tool=ask.tool, command=ask.command, pattern=ask.pattern,
                                  description=ask.description)
        result = self._ask(request)
        if isinstance(result, BaseException):
            log.warning("approval.callback_failed", error=f"{type(result).__name__}: {result}")
            return answered("deny", "error", f"{type(result).__name__}: {result}")
        if result is None:
            return answered("deny", "timeout", f"no answer in {self.timeout:g} s")
        # A callback may answer with a decision (``deny("why")``): its reason reaches the model.
        reason = result.reason if isinstance(result, ApprovalDecision) else None
        choice = (result.choice if isinstance(result, ApprovalDecision)
                  else str(result).strip().lower())
        if choice not in APPROVAL_CHOICES:
            return answered("deny", "error", f"not an answer: {result!r}")
        if choice == "always" and self.allowlist is not None:
            self.allowlist.add(ask.pattern)
        return answered(choice, "callback", reason)

    def _ask(self, request: ApprovalRequest) -> str | ApprovalDecision | BaseException | None:
        """The callback's answer, its exception, or None when it did not answer in time."""
        assert self.callback is not None
        callback = self.callback
        outcome: list[str | ApprovalDecision | BaseException] = []

        def work() -> None:
            try:
                outcome.append(callback(request))
            except Exception as exc:
                outcome.append(exc)

        worker = threading.Thread(target=work, name="mibyan-approval", daemon=True)
        worker.start()
        worker.join(self.timeout)
        return outcome[0] if outcome else None
