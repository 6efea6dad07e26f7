"""A turn stepped by its caller (``Agent.iter``), and the async API over it (``Agent.arun``,
``Agent.stream``). All three drive the same generator as ``Agent.run``: the session machine's
steps (``pipeline.shell.runner.SessionRunner.steps``), one at a time.

    with agent.iter("Plan the trip") as run:
        for step in run:                     # each step is done and logged when it is seen
            if step.stage == "tools":
                break                        # stop: the turn ends as an interrupt ends it
    run.result                               # the TurnResult

    async with agent.iter("Plan the trip") as run:
        async for step in run: ...

A step blocks (a model call, tools), so the async forms run each one in a worker thread; the
event loop only waits. Stopping early (leaving the ``with``, ``close()``, or cancelling the task
that awaits a step) interrupts the turn and lets it end as ``Agent.interrupt`` makes it end:
the log records an interrupted turn, and the session takes its next turn cleanly.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Generator
from types import TracebackType
from typing import Any, Self

from pipeline.result import TurnResult
from pipeline.run_events import RunEvent
from pipeline.shell.runner import Step

__all__ = ["AgentRun", "stream"]

Steps = Generator[Step, None, TurnResult]


class AgentRun:
    """One turn, stepped: iterate it (``for`` or ``async for``) to run it step by step;
    ``result`` is the ``TurnResult`` once it ended."""

    def __init__(self, steps: Steps, interrupt: Callable[[], None]) -> None:
        self._steps = steps
        self._interrupt = interrupt
        self.result: TurnResult | None = None
        self._started = False

    @property
    def done(self) -> bool:
        return self.result is not None

    def _next(self) -> Step | None:
        """The next step, or None once the turn ended (``result`` is set then)."""
        self._started = True
        try:
            return next(self._steps)
        except StopIteration as end:
            self.result = end.value
            return None

    # --- sync -------------------------------------------------------------------------------
    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Step:
        step = None if self.done else self._next()
        if step is None:
            raise StopIteration
        return step

    def close(self) -> None:
        """End the turn now, as an interrupt ends it (a turn never started is not run)."""
        if self.done:
            return
        if not self._started:
            self._steps.close()
            return
        self._interrupt()
        while self._next() is not None:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- async ------------------------------------------------------------------------------
    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Step:
        step = None if self.done else await self._off_loop(self._next)
        if step is None:
            raise StopAsyncIteration
        return step

    async def finish(self) -> TurnResult:
        """The rest of the turn, in one worker thread (``arun`` and ``stream`` need no pause
        between steps, and a thread hop per step would cost more than the step)."""
        if not self.done:
            await self._off_loop(self._drain)
        assert self.result is not None
        return self.result

    def _drain(self) -> None:
        while self._next() is not None:
            pass

    async def aclose(self) -> None:
        if not self.done:
            await self._off_loop(self.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def _off_loop(self, work: Callable[[], Any]) -> Any:
        """``work()`` in a worker thread. Cancelled meanwhile, the turn is interrupted; then
        ``work`` is waited for (a thread cannot be stopped, and the generator must not be
        entered twice) and the rest of the turn run, before ``CancelledError`` goes on."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, work)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self._interrupt()
            ending = asyncio.ensure_future(_then(future, loop, self._drain))
            while not ending.done():
                try:
                    await asyncio.shield(ending)
                except asyncio.CancelledError:
                    continue  # cancelled again: the turn still has to end before we leave
            raise


async def _then(future: asyncio.Future[Any], loop: asyncio.AbstractEventLoop,
                then: Callable[[], None]) -> None:
    try:
        await future
    finally:
        await loop.run_in_executor(None, then)


async def stream(run: AgentRun, queue: asyncio.Queue[RunEvent]) -> AsyncIterator[RunEvent]:
    """The typed events of ``run`` (whose steps put them on ``queue``, from the worker thread
    that runs them) as they come, ``TurnFinished`` last. Left early (the consumer stops
    iterating or is cancelled), the turn is interrupted and ends cleanly."""
    turn = asyncio.ensure_future(run.finish())
    try:
        while not (turn.done() and queue.empty()):
            getter = asyncio.ensure_future(queue.get())
            try:
                await asyncio.wait((getter, turn), return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                yield getter.result()  # the last is the turn's TurnFinished
        turn.result()  # a turn that raised: its exception
    finally:
        if not turn.done():
            turn.cancel()  # interrupts the turn, and waits for it to end
            await asyncio.gather(turn, return_exceptions=True)
