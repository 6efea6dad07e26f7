"""Decisions on the calls a paused turn waits on (rules 8), as callers give them.

    result = agent.run("tidy the build directory")
    if result.paused:
        decisions = {p.call_id: approve() for p in result.pending_approvals}
        result = agent.resume(decisions)              # or agent.run(decisions=decisions)

A decision is "once" (approve this call), "session" (approve this kind of call for the rest of
the session), "always" (also in ``<home>/approvals.json``) or "deny", with a reason the model
reads. Every pending call needs one: a decision that names no pending call, or a pending call
left without one, is a usage error and nothing is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from stages.errors import UsageError
from stages.log.pause_events import APPROVAL_CHOICES, ApprovalAnswered, PendingApproval

__all__ = ["ApprovalDecision", "Decisions", "answers_for", "approve", "approve_for_session",
           "deny"]

SOURCE = "decision"


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    """What a person decided about a call; ``call_id`` may be left out where a mapping keys
    the decisions by call."""

    choice: str
    reason: str | None = None
    call_id: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.choice not in APPROVAL_CHOICES:
            raise UsageError(f"a decision is one of {', '.join(APPROVAL_CHOICES)}, "
                             f"got {self.choice!r}")


def approve(call_id: str | None = None) -> ApprovalDecision:
    return ApprovalDecision(choice="once", call_id=call_id)


def approve_for_session(call_id: str | None = None) -> ApprovalDecision:
    return ApprovalDecision(choice="session", call_id=call_id)


def deny(reason: str | None = None, call_id: str | None = None) -> ApprovalDecision:
    return ApprovalDecision(choice="deny", reason=reason, call_id=call_id)


Decisions = Mapping[str, ApprovalDecision | str] | Iterable[ApprovalDecision]


def _by_call(decisions: Decisions) -> dict[str, ApprovalDecision]:
    if isinstance(decisions, Mapping):
        return {call_id: (ApprovalDecision(choice=d) if isinstance(d, str)
                          else attrs.evolve(d, call_id=call_id))
                for call_id, d in decisions.items()}
    out: dict[str, ApprovalDecision] = {}
    for decision in decisions:
        if not isinstance(decision, ApprovalDecision) or decision.call_id is None:
            raise UsageError("a list of decisions names each call: "
                             "approve(call_id), deny(reason, call_id), ...")
        out[decision.call_id] = decision
    return out


def answers_for(waiting: tuple[PendingApproval, ...], decisions: Decisions
                ) -> tuple[ApprovalAnswered, ...]:
    """The answers to record for ``waiting``, in its order; a usage error for a decision that
    names no pending call, or a pending call without one."""
    if not waiting:
        raise UsageError("the session waits for no approval")
    by_call = _by_call(decisions)
    ids = [p.call_id for p in waiting]
    if unknown := sorted(set(by_call) - set(ids)):
        raise UsageError(f"no pending approval for call {', '.join(unknown)}; "
                         f"pending: {', '.join(ids)}")
    if missing := [i for i in ids if i not in by_call]:
        raise UsageError(f"no decision for pending call {', '.join(missing)}")
    return tuple(ApprovalAnswered(call_id=p.call_id, pattern=p.pattern,
                                  choice=by_call[p.call_id].choice, source=SOURCE,
                                  reason=by_call[p.call_id].reason or None)
                 for p in waiting)
