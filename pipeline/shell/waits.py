"""What an agent holds for its running turn from other threads: steered messages, and the
message an ``interrupt(message)`` goes on with."""

from __future__ import annotations

from effects.steering import SteeringQueue
from stages.log.pause_events import PendingApproval
from stages.log.state import State

__all__ = ["Waits", "waiting"]


def waiting(state: State) -> tuple[PendingApproval, ...]:
    """The calls the session's turn waits on (rules 8)."""
    return state.turn.waiting if state.turn is not None else ()


class Waits:
    def __init__(self) -> None:
        self.steering = SteeringQueue()
        self._after_interrupt = SteeringQueue()

    def interrupt_with(self, message: str) -> None:
        self._after_interrupt.send(message)

    def follow_up(self) -> str | None:
        """The message the run goes on with after a turn: an interrupt's, then what was
        steered too late for the turn (oldest first, as one message); None: nothing."""
        after, steered = self._after_interrupt.take(), self.steering.take()
        if after is None or steered is None:
            return steered if after is None else after
        return f"{after}\n\n{steered}"
