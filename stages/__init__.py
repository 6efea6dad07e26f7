"""mibyan's pure core: immutable state, the event types, one fold, and a module per stage."""

from stages.decision import Decision, Next
from stages.errors import MibyanError
from stages.fold import apply_event, fold
from stages.log.events import EVENT_TYPES, Event
from stages.log.state import State

__all__ = [
    "EVENT_TYPES",
    "Decision",
    "Event",
    "MibyanError",
    "Next",
    "State",
    "apply_event",
    "fold",
]
