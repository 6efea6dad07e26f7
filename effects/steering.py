"""Messages sent into a running turn from other threads (``Agent.steer``, the gateway, the
chat's input line), waiting for the turn's next step boundary (``stages.turn.steering``)."""

from __future__ import annotations

import threading

__all__ = ["SteeringQueue"]


class SteeringQueue:
    """What was sent and not yet taken; all of it joins the conversation as one message."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: list[str] = []

    def send(self, text: str) -> None:
        with self._lock:
            self._texts.append(text)

    def take(self) -> str | None:
        """Everything sent so far, oldest first, as one text (None: nothing)."""
        # Nothing sent (the common case) needs no lock: a text sent meanwhile is taken next
        # time, as if it had come just after.
        if not self._texts:
            return None
        texts = self.drop()
        return "\n\n".join(texts) if texts else None

    def drop(self) -> tuple[str, ...]:
        """Forget what no boundary took (the turn ended first); what it was."""
        with self._lock:
            texts, self._texts = self._texts, []
        return tuple(texts)
