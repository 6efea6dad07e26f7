"""Reusable worker threads for calls the caller must be able to walk away from.

A model call (or a connect) runs on a worker so that the session's thread can wait for it *or*
for an interrupt (``run_until``). Starting a thread per call costs about 0.17 ms; a worker that
finished its call waits for the next one instead. A worker stays busy until its call returns,
even when its caller left it (an interrupt): the next call then gets another worker, so a slow
abandoned call never holds up the session. Idle workers exit after :data:`IDLE_SECONDS`, and a
forked child starts with none (threads do not survive ``fork``)."""

from __future__ import annotations

import enum
import os
import queue
import threading
from collections.abc import Callable
from typing import Final, TypeVar

__all__ = ["IDLE_SECONDS", "STOPPED", "Job", "Stopped", "run_until", "submit"]

IDLE_SECONDS = 60.0

T = TypeVar("T")


class Stopped(enum.Enum):
    """What ``run_until`` answers when its caller stopped waiting: not a value ``fn`` gives."""

    STOPPED = "stopped"


STOPPED: Final = Stopped.STOPPED


class Job:
    """One submitted call, done when it has returned (or raised, which it must not: the
    caller's function catches what it wants to report).

    Done is a lock held until then, not a ``threading.Event``: an event's wait builds a
    condition and a waiter lock in Python on every call, which cost each model call about
    10 us of CPU and half its hand-off time; a lock is waited for in C."""

    __slots__ = ("_finished", "_held", "fn")

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn
        self._finished = False  # the lock alone would look held while a waiter holds it
        self._held = threading.Lock()
        self._held.acquire()

    def wait(self, timeout: float) -> bool:
        """Whether the call is done, waiting at most ``timeout`` seconds for it."""
        if not self._held.acquire(timeout=timeout):
            return False
        self._held.release()  # done stays done: the next wait returns at once
        return True

    def done(self) -> bool:
        return self._finished

    def finish(self) -> None:
        # The worker keeps its last job while it waits for the next one (up to
        # IDLE_SECONDS): the call's closure would keep its request (a session's history) and
        # its callbacks (the session, deleted or not) alive with it. Dropped before the
        # caller is told, so that nothing of the call outlives it.
        self.fn = _spent
        self._finished = True
        self._held.release()


def _spent() -> None:
    """A finished job's call: its own was dropped (``Job.finish``)."""


class _Worker:
    __slots__ = ("inbox",)

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[Job] = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            try:
                job = self.inbox.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with _lock:
                    if self in _idle:  # nobody took this worker meanwhile: leave
                        _idle.remove(self)
                        return
                continue  # taken just now: its job is on the way
            try:
                job.fn()
            except BaseException:
                job.finish()  # this thread ends here, so it is not offered again
                raise
            with _lock:  # idle before done: the caller's next call can take this worker
                _idle.append(self)
            job.finish()


_lock = threading.Lock()
_idle: list[_Worker] = []


def _forget_workers() -> None:
    global _lock
    _lock = threading.Lock()
    _idle.clear()


os.register_at_fork(after_in_child=_forget_workers)


def submit(fn: Callable[[], None], *, name: str = "mibyan-worker") -> Job:
    """Run ``fn`` on an idle worker, or on a new one if none is idle."""
    job = Job(fn)
    with _lock:
        worker = _idle.pop() if _idle else None
    if worker is None:
        worker = _Worker()
        worker.inbox.put(job)
        threading.Thread(target=worker.run, name=name, daemon=True).start()
    else:
        worker.inbox.put(job)
    return job


def run_until(fn: Callable[[], T], stopped: Callable[[], bool], *, poll: float,
              name: str) -> T | Stopped:
    """What ``fn`` returns, run on a worker; or ``STOPPED`` as soon as ``stopped()`` holds
    (looked at every ``poll`` seconds) while ``fn`` has not given its outcome: ``fn`` is then
    left to run to its end, and what it gives is dropped. What ``fn`` raises is raised here,
    on the caller's thread."""
    outcome: list[T | BaseException] = []

    def work() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # the worker must not raise: its caller gets it
            outcome.append(exc)

    job = submit(work, name=name)
    while not job.wait(poll):
        # An outcome that came meanwhile is not dropped: a reply that is whole, a connection
        # that nobody else would close.
        if stopped() and not outcome:
            return STOPPED
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result
