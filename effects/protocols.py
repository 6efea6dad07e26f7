"""The small Protocols every effect sits behind. SDK types never cross them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from stages.decision import ModelRequest
from stages.events import ModelReplied

DeltaSink = Callable[[str], None]


class ModelClient(Protocol):
    """One provider API. Returns the reply as the event to record; raises ``ProviderError``
    (or ``ModelBehaviourError`` for an unusable reply) on failure."""

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None) -> ModelReplied:
        ...


class Clock(Protocol):
    def now(self) -> str:
        """The wall time as ISO-8601 UTC text."""
        ...

    def monotonic(self) -> float:
        ...


class IdSource(Protocol):
    def session_id(self) -> str:
        ...

    def new_id(self) -> str:
        ...
