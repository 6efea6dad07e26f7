"""``SessionPool``: the sessions of one gateway process, and the threads their turns run in.

At most ``max_open`` agents are kept open; past that the least recently used idle one is
closed (its log stays, and its owner's next request takes it up again from the log), so memory
and open files stay bounded however many sessions are created.

At most ``max_busy`` turns run or wait for a thread at once: one more is refused at once with
``503 server_busy`` and a ``Retry-After`` that spreads the refused over the time the gateway
needs to serve them (``pipeline.serve.admission``), instead of queueing behind the others and
slowing every session down (a CPU-bound gateway's latency grows with every turn let in).
Opening, listing and closing sessions never wait behind turns: they have threads of their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pipeline.serve.admission import MAX_RETRY_AFTER, Admission, Full, default_max_busy
from pipeline.serve.logged import SessionLogs
from pipeline.serve.openai_compat import ApiError
from pipeline.serve.sessions import (
    AgentFactory,
    Owners,
    ServedSession,
    closed_description,
    not_found,
)
from stages.errors import UsageError
from stages.log.events import Event
from stages.log.messages import ToolCall

T = TypeVar("T")
Listener = Callable[[Event], None]
PLATFORMS = ("gateway", "api")
# Threads beyond ``max_busy`` for the rest (creating, reopening, listing, closing sessions).
SPARE_WORKERS = 16


class SessionPool:
    def __init__(self, factory: AgentFactory, *, home: Path, max_open: int = 1000,
                 workers: int | None = None, max_busy: int | None = None,
                 max_retry_after: float = MAX_RETRY_AFTER) -> None:
        """``home`` is the agents' home: its sessions' logs, and the file of their owners.
        ``max_busy`` defaults to ``default_max_busy()``; ``workers`` to ``max_busy`` turns plus
        threads to spare for the rest."""
        self.factory = factory
        self.owners = Owners(home / "serve" / "owners.jsonl")
        self.logs = SessionLogs(home / "sessions")
        self.max_open = max_open
        max_busy = default_max_busy() if max_busy is None else max_busy
        self.admission = Admission(max_busy, max_retry_after=max_retry_after)
        self._open: dict[str, ServedSession] = {}
        # (owner, call id) -> the session whose turn ended on that call to a client's tool: a
        # stateless client (openai-agents) sends the results back without a session header.
        self._waiting: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        # Makes each session's event listener from its own (the app's metrics count events).
        self.observer: Callable[[Listener], Listener] = lambda listen: listen
        self._executor = cf.ThreadPoolExecutor(
            max_workers=workers if workers is not None else max_busy + SPARE_WORKERS,
            thread_name_prefix="mibyan-turn")

    @property
    def busy(self) -> int:
        """Turns running or waiting for a thread."""
        return self.admission.busy

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread (agent work blocks)."""
        return await asyncio.wrap_future(self.submit(fn, *args))

    def submit(self, fn: Callable[..., T], *args: Any) -> cf.Future[T]:
        """``fn(*args)`` queued for a worker thread: cancelling the future before a worker
        takes it means it never runs."""
        return self._executor.submit(fn, *args)

    def turn(self, fn: Callable[..., T], *args: Any) -> cf.Future[T]:
        """A turn ``fn(*args)`` queued as ``submit`` does, unless ``max_busy`` turns are running
        or waiting already: then ``503 server_busy`` (the turn never runs)."""
        try:
            started = self.admission.enter()
        except Full as full:
            raise busy(full) from None
        try:
            work = self.submit(fn, *args)
        except BaseException:  # the executor is shut down: the turn was never let in
            self.admission.leave(started)
            raise
        # ended, failed or cancelled unrun
        work.add_done_callback(lambda _: self.admission.leave(started))
        return work

    def create(self, owner: str, platform: str = "gateway") -> ServedSession:
        """A new session (its log started now, so it has an id); blocking."""
        if platform not in PLATFORMS:
            raise UsageError(f"platform must be one of {', '.join(PLATFORMS)}, got {platform!r}")
        holder: list[ServedSession] = []
        agent = self.factory(None, platform, self.observer(
            lambda e: holder[0].on_event(e) if holder else None))
        session_id = agent.open()
        session = ServedSession(session_id, owner, platform, agent,
                                self.logs.describe(session_id), self.logs)
        holder.append(session)
        self.owners.add(session.id, owner, platform)
        self._keep(session)
        return session

    def find(self, owner: str, session_id: str) -> ServedSession | None:
        """The owner's open session, None when it is not open; not blocking. Another owner's
        session is "not found", as a session that does not exist."""
        with self._lock:
            session = self._open.get(session_id)
        if session is not None and session.owner != owner:
            raise not_found(session_id)
        return session

    def get(self, owner: str, session_id: str) -> ServedSession:
        """The owner's session (taken up again from its log when it was closed); blocking."""
        session = self.find(owner, session_id)
        if session is not None:
            return session
        known = self.owners.get(session_id)
        if known is None or known[0] != owner:
            raise not_found(session_id)
        return self._reopen(owner, session_id, known[1])

    def _reopen(self, owner: str, session_id: str, platform: str) -> ServedSession:
        logged = self.logs.describe(session_id)
        with self._lock:  # two requests for a closed session open it once
            session = self._open.get(session_id)
            if session is not None:
                return session
            holder: list[ServedSession] = []
            agent = self.factory(session_id, platform, self.observer(
                lambda e: holder[0].on_event(e) if holder else None))
            session = ServedSession(session_id, owner, platform, agent, logged, self.logs)
            holder.append(session)
            self._open[session_id] = session
        self._evict(spare=session)
        return session

    def waiting_on(self, owner: str, call_id: str) -> str | None:
        """The owner's session whose last turn ended on the client call ``call_id``."""
        with self._lock:
            return self._waiting.get((owner, call_id))

    def note_calls(self, session: ServedSession, calls: Sequence[ToolCall]) -> None:
        """The session's turn ended on ``calls`` to its client's tools (none: it waits for
        none now)."""
        with self._lock:
            for key in [k for k, v in self._waiting.items() if v == session.id]:
                del self._waiting[key]
            self._waiting.update({(session.owner, c.id): session.id for c in calls})

    def adopt(self, owner: str, session_id: str, platform: str = "gateway") -> None:
        """Give ``owner`` a session whose log exists (a fork's child): its first use opens
        it."""
        self.owners.add(session_id, owner, platform)

    def counts(self) -> tuple[int, int]:
        """How many sessions are open, and how many of them run a turn."""
        with self._lock:
            return len(self._open), sum(s.busy for s in self._open.values())

    def owned(self, owner: str) -> list[ServedSession]:
        with self._lock:
            return [s for s in self._open.values() if s.owner == owner]

    def listed(self, owner: str) -> list[dict[str, Any]]:
        """The owner's sessions, oldest first, open or not, described alike (those not open
        from their logs: blocking)."""
        open_ = {s.id: s for s in self.owned(owner)}
        return [open_[sid].describe() if sid in open_ else
                closed_description(sid, platform, self.logs.describe(sid))
                for sid, platform in self.owners.of(owner)]

    def close(self, session: ServedSession, *, delete: bool = False) -> None:
        """Close the agent (the caller holds the claim); its logs stay on disk. A deleted
        session is taken from its owner too: it is answered as unknown from now on, after a
        restart as well."""
        if delete:  # first: a request meanwhile cannot reopen it
            self.owners.remove(session.id)
        self.note_calls(session, ())
        with self._lock:
            self._open.pop(session.id, None)
        session.close(deleted=delete)
        if delete:
            self.logs.forget(session.lineage)

    def _keep(self, session: ServedSession) -> None:
        with self._lock:
            self._open[session.id] = session
        self._evict(spare=session)

    def _evict(self, *, spare: ServedSession) -> None:
        """Close the least recently used idle sessions past ``max_open``, never ``spare``: it
        was opened for a request about to use it (while the others are busy, the pool is over
        its bound until one of them goes idle)."""
        with self._lock:
            excess = len(self._open) - self.max_open
            idle = sorted((s for s in self._open.values() if not s.busy and s is not spare),
                          key=lambda s: s.last_used)[:max(excess, 0)]
        for session in idle:
            try:
                with session.claimed():
                    self.close(session)
            except ApiError:  # it became busy meanwhile: keep it open
                continue

    def stopping(self) -> None:
        """The server is stopping: every events stream gets its ``closed`` event now (the
        agents are closed by :meth:`shutdown`, once the requests are over). Safe on the
        event loop: it only queues the events."""
        with self._lock:
            sessions = list(self._open.values())
        for session in sessions:
            session.publish({"type": "closed", "id": session.id, "reason": "server_stopping"})

    def shutdown(self) -> None:
        """Interrupt running turns, wait for them, close every agent (once)."""
        with self._lock:
            sessions = list(self._open.values())
            self._open.clear()
        for session in sessions:
            session.interrupt()
        self._executor.shutdown(wait=True)
        for session in sessions:
            session.close()


def busy(full: Full) -> ApiError:
    """The refusal of a turn past ``max_busy``: 503, as OpenAI answers when it is overloaded,
    with the wait in whole seconds (``Retry-After``, RFC 9110) and in milliseconds
    (``retry-after-ms``, which the openai SDKs prefer: clients told the same second do not all
    come back at its start)."""
    seconds = math.ceil(full.retry_after)
    return ApiError(503, f"The server is busy: {full.limit} turns are running or waiting. "
                         f"Please retry after {seconds} seconds.", type="server_error",
                    code="server_busy", headers={"Retry-After": str(seconds),
                                                 "retry-after-ms": str(round(full.retry_after
                                                                             * 1000))})
