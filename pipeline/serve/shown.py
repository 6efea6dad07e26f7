"""What a gateway client is shown of a session's failures: a failed model call's text names the
provider's address (an internal host, a query string) and repeats what it answered, so a client
is told the failure's class and the provider's HTTP status (``upstream_failed``) instead. The
event log keeps the whole text (replay reads it back as it was written) and the server's log
has it; only the copies a client gets are changed.

The note a turn that failed with no reply leaves in the history (``[no reply: the model call
failed: ...]``, written by ``stages.turn.step``) holds the whole text too, also in logs written
before the gateway hid it. A note carries no class or status to tell, so every such note is
shown with one neutral text: a session reopened from its log shows the same history as before
the restart.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pipeline.serve.openai_compat import upstream_failed
from stages.log.events import (
    ContextInherited,
    Event,
    HistoryLoaded,
    ModelFailed,
    SummaryFailed,
    TurnAborted,
    TurnFinished,
)
from stages.log.messages import Message

FAILED_NOTE = "[no reply: the model call failed: "
SHOWN_NOTE = f"{FAILED_NOTE}the server's log has the details]"
# The summariser's own failures (effects.performers); any other one is a failed model
# call.
OWN_SUMMARY_FAILURES = ("EmptySummary", "Interrupted")


def note(text: str | None) -> str | None:
    return SHOWN_NOTE if text is not None and text.startswith(FAILED_NOTE) else text


def history(messages: Iterable[Message]) -> tuple[Message, ...]:
    """``messages`` with each failed call's note shown neutrally (a user's message that reads
    like one is the user's)."""
    return tuple(_message(m) for m in messages)


def _message(message: Message) -> Message:
    if message.role != "assistant" or not isinstance(message.content, str):
        return message  # a user's message is the user's; an image is no note
    text = note(message.content)
    return message if text == message.content else attrs.evolve(message, content=text)


def error(exit_reason: str, text: str | None, failure: ModelFailed | None) -> str | None:
    """A turn's error: a failed model call's (``failure``, the turn's last) as its class and
    status; the turn machine's own words as they are."""
    if failure is None or not exit_reason.startswith("model_error("):
        return text
    return upstream_failed(failure.error_type, failure.status)


def event(e: Event, failure: ModelFailed | None) -> Event:
    """``e`` as a session's followers get it; ``failure`` is the running turn's last failed
    model call. An exception that broke a turn is named by its class, as an unexpected error's
    500 says nothing of it."""
    if isinstance(e, ModelFailed):
        return attrs.evolve(e, message=upstream_failed(e.error_type, e.status), body=None)
    if isinstance(e, TurnFinished):
        return attrs.evolve(e, error=error(e.exit_reason, e.error, failure), note=note(e.note))
    if isinstance(e, SummaryFailed) and e.error_type not in OWN_SUMMARY_FAILURES:
        return attrs.evolve(e, message=upstream_failed(e.error_type, None))
    if isinstance(e, TurnAborted):
        return attrs.evolve(e, error=e.error.partition(":")[0])
    if isinstance(e, HistoryLoaded | ContextInherited):
        return attrs.evolve(e, messages=history(e.messages))
    return e
