"""Events of a turn that waits for people (rules 8): approvals that pause it, and messages
steered into it while it runs.

A call that needs approval can end the turn waiting (``ApprovalsPending``: the calls, as the
person is asked about them); the turn goes on when the decisions come back
(``ApprovalsDecided``: one answer per pending call), in this process or another one. A message
sent while the turn runs joins it at the next step boundary (``Steered``). All three are
observations: a replay serves them from the log.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from stages.log.setting_checks import one_of

REDACTED = {"redact": True}
APPROVAL_CHOICES = ("once", "session", "always", "deny")


@attrs.frozen(kw_only=True)
class ApprovalAnswered:
    """Whether a call that needs approval may run: ``choice`` once / session / always / deny;
    ``source`` says who answered (callback, allowlist, default, timeout, error, decision)."""

    kind: ClassVar[str] = "approval_answered"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    call_id: str
    pattern: str
    choice: str = attrs.field(validator=one_of(APPROVAL_CHOICES))
    source: str
    reason: str | None = attrs.field(default=None, metadata=REDACTED)


@attrs.frozen(kw_only=True)
class PendingApproval:
    """One call waiting for a decision: what it would run, and why it needs approval."""

    call_id: str
    tool: str
    command: str = attrs.field(metadata=REDACTED)
    pattern: str
    description: str


@attrs.frozen(kw_only=True)
class ApprovalsPending:
    """The turn stops here until the calls are decided (nobody was asked in this process)."""

    kind: ClassVar[str] = "approvals_pending"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    calls: tuple[PendingApproval, ...] = attrs.field(metadata=REDACTED)


@attrs.frozen(kw_only=True)
class ApprovalsDecided:
    """The decisions on every pending call; the waiting turn goes on with them."""

    kind: ClassVar[str] = "approvals_decided"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    answers: tuple[ApprovalAnswered, ...] = attrs.field(metadata=REDACTED)


@attrs.frozen(kw_only=True)
class Steered:
    """A message sent while the turn ran, joining the conversation as a user message."""

    kind: ClassVar[str] = "steered"
    schema_version: ClassVar[int] = 1
    observed: ClassVar[bool] = True
    text: str = attrs.field(metadata=REDACTED)
