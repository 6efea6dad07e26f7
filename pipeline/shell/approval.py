"""Approvals of dangerous commands: the effect behind ``AskApproval``.

    def ask(request: ApprovalRequest) -> str:       # "once" | "session" | "always" | "deny"
        return "once" if input(f"run {request.command}? ") == "y" else "deny"

    agent = Agent(..., approval_callback=ask)

The tool plan (a pure stage) decides that a command needs approval; the :class:`Approver`
answers, and its answer is an observation (``ApprovalAnswered``) that a replay serves from the
log without asking again. "session" approves that kind of command for the rest of the session
(the fold remembers it); "always" also adds it to ``<home>/approvals.json`` so that later
sessions do not ask. No callback (unless ``default="once"``), a callback that raises or gives
no valid answer, and no answer within ``timeout`` seconds all deny.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import attrs

from effects.logs import get_logger
from stages.decision import AskApproval
from stages.errors import UsageError
from stages.log.events import APPROVAL_CHOICES, ApprovalAnswered

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


ApprovalCallback = Callable[[ApprovalRequest], str]


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


class Approver:
    """``default`` answers when there is no callback: "deny" (for unattended runs, cron and
    subagents), or "once" for a trusted automation that accepts the risk."""

    def __init__(self, callback: ApprovalCallback | None = None, *,
                 allowlist: AllowList | None = None, timeout: float = APPROVAL_TIMEOUT,
                 default: str = "deny") -> None:
        if default not in ("deny", "once"):
            raise UsageError(f"the approval default must be 'deny' or 'once', got {default!r}")
        self.callback = callback
        self.allowlist = allowlist
        self.timeout = timeout
        self.default = default

    def answer(self, ask: AskApproval) -> ApprovalAnswered:
        def answered(choice: str, source: str, reason: str | None = None) -> ApprovalAnswered:
            return ApprovalAnswered(call_id=ask.call_id, pattern=ask.pattern, choice=choice,
                                    source=source, reason=reason)

        if self.allowlist is not None and ask.pattern in self.allowlist.patterns():
            return answered("always", "allowlist")
        if self.callback is None:
            return answered(self.default, "default", "no approval callback is configured")
        request = ApprovalRequest(tool=ask.tool, command=ask.command, pattern=ask.pattern,
                                  description=ask.description)
        result = self._ask(request)
        if isinstance(result, BaseException):
            log.warning("approval.callback_failed", error=f"{type(result).__name__}: {result}")
            return answered("deny", "error", f"{type(result).__name__}: {result}")
        if result is None:
            return answered("deny", "timeout", f"no answer in {self.timeout:g} s")
        choice = str(result).strip().lower()
        if choice not in APPROVAL_CHOICES:
            return answered("deny", "error", f"not an answer: {result!r}")
        if choice == "always" and self.allowlist is not None:
            self.allowlist.add(ask.pattern)
        return answered(choice, "callback")

    def _ask(self, request: ApprovalRequest) -> str | BaseException | None:
        """The callback's answer, its exception, or None when it did not answer in time."""
        assert self.callback is not None
        callback = self.callback
        outcome: list[str | BaseException] = []

        def work() -> None:
            try:
                outcome.append(callback(request))
            except Exception as exc:
                outcome.append(exc)

        worker = threading.Thread(target=work, name="mibyan-approval", daemon=True)
        worker.start()
        worker.join(self.timeout)
        return outcome[0] if outcome else None
