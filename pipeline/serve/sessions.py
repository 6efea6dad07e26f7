"""The gateway's sessions: many agents in one process, each used by one request at a time.

A turn blocks (model calls, tools), so it runs in a worker thread; the event loop only waits
for it. A session is *claimed* for a turn (or a replay): a second request meanwhile is refused
with 409 rather than queued, since the two would interleave one conversation. Each session
belongs to the token that created it; another token is told it does not exist (404), so
session ids leak nothing. Ownership is kept in ``<home>/serve/owners.jsonl``, so that after a
restart (or after an idle session was closed to bound memory) the owner can take it up again
from its log; a deleted session is no one's any more (a row in the file says so).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from effects.logs import get_logger
from pipeline.agent import Agent
from pipeline.result import TurnResult
from pipeline.run_events import RunEvent
from pipeline.run_events import TurnFinished as RunTurnFinished
from pipeline.serve import shown as show
from pipeline.serve.logged import Logged, SessionLogs
from pipeline.serve.openai_compat import ApiError, echoed
from pipeline.shell.journal import encode
from stages.log.events import Event, ModelFailed
from stages.log.messages import Message

# (session id to resume or None, platform, event listener) -> an agent.
AgentFactory = Callable[[str | None, str, Callable[[Event], None]], Agent]
log = get_logger(__name__)


class Subscriber:
    """A queue on the event loop that worker threads feed (``put`` is thread-safe)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def put(self, item: dict[str, Any]) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


class ServedSession:
    """One agent and what the gateway knows of it. ``id`` is the first log's id and stays the
    session's name; ``lineage`` lists its logs (compression continues a session in a child).
    ``logged`` is what its logs told when it was opened (a new session's: its start), so a
    session reopened after a restart describes itself as it did before."""

    def __init__(self, session_id: str, owner: str, platform: str, agent: Agent,
                 logged: Logged, logs: SessionLogs) -> None:
        self.id, self.owner, self.platform, self.agent = session_id, owner, platform, agent
        self.created = logged.created
        self.lineage = list(logged.lineage)
        self.turns = logged.turns
        self.logs = logs
        self.last_result: TurnResult | None = None
        self.last_used = time.monotonic()
        self.subscribers: set[Subscriber] = set()
        self._claim = threading.Lock()
        self._closed = False
        self._deleted = False
        self._running = False
        # Requests that claimed the session so far: the number names the current claim.
        self.claims = 0
        self._left = False  # the current claim's client left before its turn started
        # The running turn's last failed model call (its class and the provider's status).
        self._failure: ModelFailed | None = None
        self._state = threading.Lock()

    @property
    def busy(self) -> bool:
        return self._claim.locked()

    def claim(self) -> None:
        """The session for one request; 409 when another has it, or when it was closed
        after the request found it. ``release`` gives it back
        (from any thread: a streamed turn's worker releases it when the turn ends)."""
        if not self._claim.acquire(blocking=False):
            raise ApiError(409, f"Session {self.id} is busy with another request; retry when "
                           "it is done (or interrupt it).", type="conflict_error",
                           code="session_busy")
        if self._closed:  # found by a request before it was closed: its agent is gone
            self._claim.release()
            if self._deleted:
                raise not_found(self.id)
            raise ApiError(409, f"Session {self.id} was closed meanwhile; retry (it reopens "
                           "from its log).", type="conflict_error", code="session_closed")
        with self._state:
            self.claims += 1
            self._left = False

    def release(self) -> None:
        self.last_used = time.monotonic()
        self._claim.release()

    @contextmanager
    def claimed(self) -> Iterator[None]:
        self.claim()
        try:
            yield
        finally:
            self.release()

    def publish(self, item: dict[str, Any]) -> None:
        for subscriber in tuple(self.subscribers):
            subscriber.put(item)

    def on_event(self, event: Event) -> None:
        if isinstance(event, ModelFailed):
            self._failure = event
        if self.subscribers:
            shown = show.event(event, self._failure)
            self.publish({"type": "event", "kind": event.kind, "event": encode(shown)})

    def _typed(self, event: RunEvent) -> None:
        """The turn's typed events (``pipeline.run_events``), as ``Agent.stream`` yields them;
        its end is published once its result is shown as a client may see it."""
        if self.subscribers and not isinstance(event, RunTurnFinished):
            self.publish(event.to_dict())

    def run(self, message: str | None, *, on_delta: Callable[[str], object] | None = None,
            system_message: str | None = None, history: Any = None,
            output: Any = None, client_tools: Sequence[Mapping[str, Any]] = (),
            tool_results: Sequence[Mapping[str, Any]] = (), decisions: Any = None,
            images: Sequence[Any] = ()) -> TurnResult:
        """One turn (or, with ``decisions`` and no message, the rest of the turn that waits
        for them), in the calling (worker) thread; the caller holds the claim. Refused
        (and nothing logged) when the claim's client left before the turn could start."""
        def delta(text: str) -> None:
            if on_delta is not None:
                on_delta(text)
            if self.subscribers:
                self.publish({"type": "delta", "text": text})

        with self._state:
            if self._left:
                raise client_gone()
            self._running = True
        self._failure = None
        try:
            result = self.agent.run(message, system_message=system_message,
                                    conversation_history=history, stream_callback=delta,
                                    on_event=self._typed, output_type=output,
                                    client_tools=client_tools, tool_results=tool_results,
                                    decisions=decisions, images=images)
        finally:
            with self._state:  # an interrupt that came as the turn ended is for no turn
                self._running = False
                self.agent.forget_interrupt()
        result = self._shown(result)
        if self.subscribers:
            self.publish(RunTurnFinished(result=result).to_dict())
        self.turns += 1
        self.last_result = result
        current = self.agent.session_id
        if current is not None and current != self.lineage[-1]:
            self.lineage.append(current)
        return result

    def _shown(self, result: TurnResult) -> TurnResult:
        """``result`` as its client may see it (``pipeline.serve.shown``): a failed model
        call's error and notes without its text, which the server's (redacted) log keeps."""
        if result.error is not None:
            log.warning("serve.turn_failed", session_id=self.id, error=result.error)
        return attrs.evolve(result, messages=show.history(result.messages),
                            error=show.error(result.turn_exit_reason, result.error,
                                             self._failure))

    def interrupt(self) -> bool:
        """Stop the running turn; False (and nothing set) when no turn runs, so an interrupt
        between turns cannot stop the next one."""
        with self._state:
            if self._running:
                self.agent.interrupt()
            return self._running

    def steer(self, text: str) -> bool:
        """Send ``text`` into the running turn (it joins at its next step boundary); False
        (and nothing sent) when no turn runs, so that it cannot land in a later one."""
        with self._state:
            if self._running:
                self.agent.steer(text)
            return self._running

    def leave(self, claim: int) -> None:
        """The client of claim number ``claim`` left: its turn is interrupted, or never starts
        when it has not yet. The client of an earlier claim (a stream ending as another
        request's turn starts) stops nothing."""
        with self._state:
            if claim != self.claims:
                return
            if self._running:
                self.agent.interrupt()
            else:
                self._left = True

    def close(self, *, deleted: bool = False) -> None:
        """Close the agent (the caller holds the claim); its followers are told, so that their
        event streams end rather than wait on a session that will run no more turns. A request
        that found a ``deleted`` session before it was closed is told it does not exist."""
        self._closed, self._deleted = True, deleted
        self.publish({"type": "closed", "id": self.id})
        self.agent.close()

    def describe(self, *, messages: bool = False) -> dict[str, Any]:
        """The session; with its ``messages``, as of its last turn (read from its log, which
        blocks, while it has run none since it was opened)."""
        body = description(self.id, self.platform, created=self.created,
                           model=self.agent.settings.model, turns=self.turns, busy=self.busy,
                           open_=True, lineage=self.lineage)
        if messages:
            body["messages"] = [m.to_openai() for m in self.history()]
        return body

    def history(self) -> tuple[Message, ...]:
        if self.last_result is not None:
            return self.last_result.messages
        return show.history(self.logs.history(self.lineage[-1]))


def description(session_id: str, platform: str, *, created: int | None, model: str | None,
                turns: int, busy: bool, open_: bool, lineage: Sequence[str]
                ) -> dict[str, Any]:
    """A session as the API describes it, open or closed."""
    return {"id": session_id, "object": "session", "created": created, "platform": platform,
            "model": model, "turns": turns, "busy": busy, "open": open_,
            "log_session_id": lineage[-1], "lineage": list(lineage)}


def closed_description(session_id: str, platform: str, logged: Logged) -> dict[str, Any]:
    """A session the gateway has not open, as its logs tell it."""
    return description(session_id, platform, created=logged.created, model=logged.model,
                       turns=logged.turns, busy=False, open_=False, lineage=logged.lineage)


class Owners:
    """Which owner each session belongs to (and its platform), appended to a JSON-lines
    file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._owners: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        if path is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    if row.get("deleted"):
                        self._owners.pop(row["session_id"], None)
                    else:
                        self._owners[row["session_id"]] = (row["owner"], row["platform"])
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue  # a torn last line: that session was never acknowledged

    def get(self, session_id: str) -> tuple[str, str] | None:
        """(owner, platform), or None for a session the gateway never made."""
        return self._owners.get(session_id)

    def of(self, owner: str) -> list[tuple[str, str]]:
        """(session id, platform) of every session of ``owner``, oldest first."""
        with self._lock:
            return [(sid, platform) for sid, (who, platform) in self._owners.items()
                    if who == owner]

    def add(self, session_id: str, owner: str, platform: str) -> None:
        with self._lock:
            self._owners[session_id] = (owner, platform)
            self._append({"session_id": session_id, "owner": owner, "platform": platform})

    def remove(self, session_id: str) -> None:
        """The session is no one's any more (its log stays on disk)."""
        with self._lock:
            self._owners.pop(session_id, None)
            self._append({"session_id": session_id, "deleted": True})

    def _append(self, row: dict[str, Any]) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as file:
                file.write(json.dumps(row) + "\n")


def client_gone() -> ApiError:
    # nginx's "client closed request": no one reads it, and it is no server error to log.
    return ApiError(499, "The client left before its turn started; it did not run.",
                    code="client_closed_request")


def not_found(session_id: str) -> ApiError:
    return ApiError(404, f"No session {echoed(session_id)!r}.", param="session_id",
                    code="session_not_found")
