"""Memory providers and the manager that runs them.

A :class:`MemoryProvider` recalls what may help with a turn (``prefetch``) and learns from
finished exchanges (``sync_turn``). The :class:`MemoryManager` holds the built-in provider (the
``MEMORY.md``/``USER.md`` store: its snapshot is in the system prompt, its writes go through the
``memory`` tool) and at most one external provider; a second is refused with a clear error.

* ``prefetch_all(query)`` asks every provider at once, once a turn, each within the timeout;
  one that fails or is slow is left out (and named), never fatal. The turn records the results
  as an observation (``MemoryPrefetched``), so a replay never asks a provider again; they are
  fenced into one block appended to the turn's user message when the request is sent (not to
  the system prompt, which stays byte-stable, and not to the history).
* ``sync_all(user, assistant)`` hands the finished exchange to every provider on one
  background worker, so writes keep turn order; ``shutdown`` drains it (at most 5 s).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Sequence
from pathlib import Path

from effects.logs import get_logger
from pipeline.tools import Tool
from stages.errors import UsageError
from stages.log.events import MemoryPrefetched
from stages.log.messages import Message

__all__ = ["BuiltinMemory", "MemoryManager", "MemoryProvider"]

PREFETCH_TIMEOUT = 5.0
SYNC_DRAIN_TIMEOUT = 5.0
MAX_RECALL_CHARS = 4_000

log = get_logger(__name__)


class MemoryProvider:
    """One memory backend: subclass it and set ``name``; every hook has a harmless default,
    so a provider overrides only what it does."""

    name: str = "provider"

    def is_available(self) -> bool:
        """Whether the provider can run here (no network: a quick local check)."""
        return True

    def initialize(self, session_id: str, **context: object) -> None:
        """The session starts (or resumes): ``context`` holds ``home`` and ``platform``."""

    def prefetch(self, query: str, *, session_id: str) -> str:
        """Text worth recalling for ``query`` (the user's message), or ""."""
        return ""

    def sync_turn(self, user: str, assistant: str, *, session_id: str) -> None:
        """Learn from a finished exchange (runs in the background, in turn order)."""

    def on_pre_compress(self, messages: Sequence[Message]) -> str:
        """The middle of the conversation is about to be summarised: anything to keep."""
        return ""

    def on_session_end(self, session_id: str) -> None:
        """The agent is closing the session."""

    def tools(self) -> tuple[Tool, ...]:
        """Tools the provider offers the model."""
        return ()

    def shutdown(self) -> None:
        """Release what the provider holds."""


class BuiltinMemory(MemoryProvider):
    """The ``MEMORY.md``/``USER.md`` store under the home. Its snapshot is read with the prompt
    inputs at session start; it recalls nothing per turn."""

    name = "builtin"

    def __init__(self, home: str | Path) -> None:
        self.home = Path(home).expanduser()

    def tools(self) -> tuple[Tool, ...]:
        from pipeline.memory_tool import memory_tool
        return (memory_tool(self.home),)


class MemoryManager:
    def __init__(self, builtin: MemoryProvider | None = None,
                 external: MemoryProvider | None = None, *,
                 prefetch_timeout: float = PREFETCH_TIMEOUT) -> None:
        self.builtin = builtin
        self.external: MemoryProvider | None = None
        self.prefetch_timeout = prefetch_timeout
        self._sync: cf.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        # Per hook: the providers it was found for (built-in, external) and those doing it.
        self._found: dict[str, tuple[MemoryProvider | None, MemoryProvider | None,
                                     tuple[MemoryProvider, ...]]] = {}
        if external is not None:
            self.add(external)

    @property
    def providers(self) -> tuple[MemoryProvider, ...]:
        return tuple(p for p in (self.builtin, self.external) if p is not None)

    def _doing(self, hook: str) -> tuple[MemoryProvider, ...]:
        """The providers that override ``hook`` (the others would only cost a thread), found
        once a turn asks for them until the providers change."""
        found = self._found.get(hook)
        if found is not None and found[0] is self.builtin and found[1] is self.external:
            return found[2]
        default = getattr(MemoryProvider, hook)
        doing = tuple(p for p in self.providers if getattr(type(p), hook) is not default)
        self._found[hook] = (self.builtin, self.external, doing)
        return doing

    def add(self, provider: MemoryProvider) -> None:
        """Register the external provider; there can be one."""
        if self.external is not None:
            raise UsageError(f"memory provider {provider.name!r} refused: "
                             f"{self.external.name!r} is already the external provider, and "
                             "only one can be active")
        if not provider.is_available():
            raise UsageError(f"memory provider {provider.name!r} is not available here")
        self.external = provider

    def tools(self) -> tuple[Tool, ...]:
        return tuple(tool for provider in self.providers for tool in provider.tools())

    def initialize(self, session_id: str, **context: object) -> None:
        for provider in self.providers:
            try:
                provider.initialize(session_id, **context)
            except Exception as exc:
                log.warning("memory_initialize_failed", provider=provider.name, error=str(exc))

    def prefetch_all(self, query: str, *, session_id: str) -> MemoryPrefetched:
        """Every provider's recall for ``query``, asked in parallel within the timeout."""
        providers = self._doing("prefetch")
        if not providers or not query.strip():
            return MemoryPrefetched()
        pool = cf.ThreadPoolExecutor(max_workers=len(providers),
                                     thread_name_prefix="mibyan-prefetch")
        futures = {pool.submit(p.prefetch, query, session_id=session_id): p for p in providers}
        done, _ = cf.wait(futures, timeout=self.prefetch_timeout)
        pool.shutdown(wait=False, cancel_futures=True)
        results, failed = [], []
        for future, provider in futures.items():
            error = "timed out" if future not in done else future.exception()
            if error is not None:
                failed.append(provider.name)
                log.warning("memory_prefetch_failed", provider=provider.name, error=str(error))
                continue
            text = future.result()
            if isinstance(text, str) and text.strip():
                results.append((provider.name, text.strip()[:MAX_RECALL_CHARS]))
        return MemoryPrefetched(results=tuple(results), failed=tuple(failed))

    def _worker(self) -> cf.ThreadPoolExecutor:
        with self._lock:
            if self._sync is None:
                self._sync = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mem-sync")
            return self._sync

    def sync_all(self, user: str, assistant: str, *, session_id: str) -> None:
        """Hand the exchange to every provider, in the background, in turn order."""
        for provider in self._doing("sync_turn"):
            self._worker().submit(self._sync_one, provider, user, assistant, session_id)

    @staticmethod
    def _sync_one(provider: MemoryProvider, user: str, assistant: str, session_id: str) -> None:
        try:
            provider.sync_turn(user, assistant, session_id=session_id)
        except Exception as exc:
            log.warning("memory_sync_failed", provider=provider.name, error=str(exc))

    def flush(self, timeout: float = SYNC_DRAIN_TIMEOUT) -> bool:
        """Wait for the syncs queued so far; False when they did not finish in time."""
        with self._lock:
            worker = self._sync
        if worker is None:
            return True
        return worker.submit(lambda: None).exception(timeout=timeout) is None

    def on_pre_compress(self, messages: Sequence[Message]) -> str:
        """What the providers want kept when the conversation is compressed."""
        kept = []
        for provider in self.providers:
            try:
                kept.append(provider.on_pre_compress(messages))
            except Exception as exc:
                log.warning("memory_pre_compress_failed", provider=provider.name, error=str(exc))
        return "\n\n".join(k for k in kept if k)

    def shutdown(self, session_id: str | None = None) -> None:
        """End the session for every provider after draining the syncs (at most 5 s)."""
        try:
            self.flush(SYNC_DRAIN_TIMEOUT)
        except cf.TimeoutError:
            log.warning("memory_sync_drain_timed_out", seconds=SYNC_DRAIN_TIMEOUT)
        with self._lock:
            worker, self._sync = self._sync, None
        if worker is not None:
            worker.shutdown(wait=False, cancel_futures=True)
        for provider in self.providers:
            try:
                if session_id is not None:
                    provider.on_session_end(session_id)
                provider.shutdown()
            except Exception as exc:
                log.warning("memory_shutdown_failed", provider=provider.name, error=str(exc))
