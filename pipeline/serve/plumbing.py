"""What every route needs: the owner of the bearer token, the JSON body, a turn awaited while
watching for the client to leave, and a worker's output drained from a queue."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import re
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from starlette.exceptions import HTTPException
from starlette.requests import Request

from effects.logs import get_logger
from pipeline.serve import openai_compat as oa
from pipeline.serve.bearer import token_owner
from pipeline.serve.gateway_config import ServeConfig
from pipeline.serve.json_limits import JsonRefused, parse
from pipeline.serve.pool import SessionPool
from pipeline.serve.sessions import ServedSession, client_gone
from stages.errors import LogError, ProviderError, UsageError

T = TypeVar("T")
KEEPALIVE_SECONDS = 15.0
log = get_logger(__name__)


def owner_of(request: Request) -> str:
    """The owner of the request's bearer token; 401 without a valid one."""
    return token_owner(request.app.state.config, request.headers.get("authorization", ""))


async def json_body(request: Request) -> Any:
    """The body's JSON value (``pipeline.serve.guard`` read it, within its limits)."""
    config: ServeConfig = request.app.state.config
    try:
        return parse(await request.body(), max_depth=config.max_json_depth)
    except JsonRefused as exc:
        raise oa.bad(f"We could not parse the JSON body of your request: {exc}.",
                     code="invalid_json") from exc


def leave(session: ServedSession, claim: int, work: cf.Future[Any]) -> bool:
    """The client of ``work`` (the turn of the session's claim number ``claim``) left: a turn
    still waiting for a worker is dropped (True); one that started is interrupted, to end
    promptly and cleanly, and one about to start does not (``ServedSession.leave``)."""
    if work.cancel():
        return True
    session.leave(claim)
    return False


def streamed_turn(pool: SessionPool, session: ServedSession, run: Callable[[], T]
                  ) -> tuple[asyncio.Future[T], Callable[[], None]]:
    """The claimed session's turn ``run`` queued for a worker, which releases the claim when
    the turn ends; and what the stream does when its client leaves (``leave``): the claim of a
    turn that will never run is released then, as no worker will."""
    def turn() -> T:
        try:
            return run()
        finally:
            session.release()
    try:
        claim, work = session.claims, pool.turn(turn)
    except BaseException:  # refused (503): no worker will release the claim
        session.release()
        raise

    def left() -> None:
        if leave(session, claim, work):
            session.release()
    return asyncio.wrap_future(work), left


async def _left(request: Request, task: asyncio.Future[Any]) -> bool:
    """Whether the client left before ``task`` was done (it is waited for until one or the
    other)."""
    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
    watcher = asyncio.ensure_future(watch())
    done, _ = await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    if watcher not in done:
        watcher.cancel()
    return watcher in done


async def until_done(request: Request, session: ServedSession, work: cf.Future[T]) -> T:
    """``work``'s result (the turn of the session's claim, queued for a worker), watching for
    the client to leave meanwhile (``leave``)."""
    claim, task = session.claims, asyncio.wrap_future(work)
    if await _left(request, task) and leave(session, claim, work):
        raise client_gone()
    return await task


async def unless_gone(request: Request, work: cf.Future[T]) -> T:
    """``work``'s result (a session made or reopened for the request, queued for a worker),
    watching for the client to leave meanwhile. Work still waiting for a worker then never
    runs (499). Work a worker has started is done all the same and kept, as if the answer had
    been lost on its way: a new session is its owner's and listed, a reopened one stays open
    until the pool closes it; undoing it would be more work for no one, and could itself be
    cut short."""
    task = asyncio.wrap_future(work)
    if await _left(request, task) and work.cancel():
        raise client_gone()
    return await task


async def created(request: Request, owner: str, platform: str) -> ServedSession:
    """A new session of ``owner`` (``SessionPool.create``), unless the client leaves while it
    waits for a worker (``unless_gone``)."""
    pool: SessionPool = request.app.state.pool
    return await unless_gone(request, pool.submit(pool.create, owner, platform))


async def session_of(request: Request, owner: str, session_id: str) -> ServedSession:
    """The owner's session. An open one is found without a thread (a dict lookup must not
    queue behind running turns); a closed one is reopened from its log in a worker, unless the
    client leaves while it waits for one (``unless_gone``)."""
    pool: SessionPool = request.app.state.pool
    session = pool.find(owner, session_id)
    if session is None:
        try:
            session = await unless_gone(request, pool.submit(pool.get, owner, session_id))
        except LogError as exc:  # its text names the log's path on the server
            raise oa.ApiError(500, f"Session {oa.echoed(session_id)!r} cannot be opened: its "
                              f"log is {_damage(exc)} (error {_logged(exc)}).",
                              type="server_error", code="session_log_unreadable") from exc
    return session


_AT = re.compile(r"is corrupt at (line \d+ \(seq \d+\): .*)", re.S)


def _damage(exc: LogError) -> str:
    """Where and how the log is damaged, without its path (a forged record is named by its
    seq, as ``log verify`` names it); what else kept it from opening otherwise."""
    found = _AT.search(str(exc))
    return (f"damaged at {found.group(1)}" if found
            else "damaged or held by another process")


async def drain(queue: asyncio.Queue[Any], worker: asyncio.Future[Any],
                keepalive: Any = None) -> AsyncIterator[Any]:
    """The items a worker thread queues, until it is done; ``keepalive`` (when given) after
    each quiet spell, so that a long silent tool run keeps the connection open."""
    while not (worker.done() and queue.empty()):
        getter = asyncio.ensure_future(queue.get())
        try:
            done, _ = await asyncio.wait((getter, worker), timeout=KEEPALIVE_SECONDS,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:  # the client left (this task is cancelled), or the worker ended first
            if not getter.done():
                getter.cancel()
        if getter in done:
            yield getter.result()
        elif not done and keepalive is not None:
            yield keepalive


def failure(exc: Exception) -> oa.ApiError:
    """An exception as the error a client is shown (unexpected ones logged, not shown)."""
    if isinstance(exc, oa.ApiError):
        return exc
    if isinstance(exc, HTTPException):
        return oa.ApiError(exc.status_code, str(exc.detail),
                           code="not_found" if exc.status_code == 404 else None)
    if isinstance(exc, UsageError):
        return oa.bad(str(exc))
    if isinstance(exc, ProviderError):  # its text names the provider's address
        log.warning("serve.provider_error", error=f"{type(exc).__name__}: {exc}")
        return oa.ApiError(502, f"The agent's turn failed: "
                           f"{oa.upstream_failed(type(exc).__name__, exc.status)}",
                           type="api_error", code="upstream_failed")
    return oa.ApiError(500, f"The server had an error while processing your request (error "
                       f"{_logged(exc)}); its log has the details.", type="server_error")


def _logged(exc: Exception) -> str:
    """The id under which the server's log (redacted) keeps ``exc``, for the client to quote:
    its text names paths and internals a client must not see."""
    error_id = uuid.uuid4().hex[:12]
    log.error("serve.unexpected_error", error_id=error_id,
              error=f"{type(exc).__name__}: {exc}")
    return error_id
