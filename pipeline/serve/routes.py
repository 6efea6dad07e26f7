"""The session API: create, list, get, close, send a message (streamed or not), follow a
session's events, interrupt, replay, fork, export, roll the working tree back.

Each action on an idle session (replay, fork, export, rollback) is one handler
built by :func:`idle_action`: it finds the owner's session, claims it (409 while a turn runs),
and runs the action in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pipeline.serve import openai_compat as oa
from pipeline.serve import sse
from pipeline.serve.plumbing import (
    KEEPALIVE_SECONDS,
    created,
    drain,
    failure,
    json_body,
    owner_of,
    session_of,
    streamed_turn,
    until_done,
)
from pipeline.serve.pool import SessionPool
from pipeline.serve.sessions import ServedSession, Subscriber

# (the pool, the owner's idle session, the request's JSON body) -> the answer's JSON body.
Action = Callable[[SessionPool, ServedSession, dict[str, Any]], dict[str, Any]]


def _pool(request: Request) -> SessionPool:
    return request.app.state.pool


async def _session(request: Request) -> ServedSession:
    return await session_of(request, owner_of(request), request.path_params["session_id"])


def _object(body: Any) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise oa.bad("The request body must be a JSON object.")
    return body


async def create(request: Request) -> Response:
    owner = owner_of(request)
    body = _object(await json_body(request))
    platform = body.get("platform", "gateway")
    if platform not in ("gateway", "api"):
        raise oa.bad(f"Invalid value for 'platform': {platform!r}; expected 'gateway' or "
                     "'api'.", "platform")
    session = await created(request, owner, platform)
    return JSONResponse(session.describe(), status_code=201)


async def listed(request: Request) -> Response:
    """The owner's sessions, open or not (``SessionPool.listed``)."""
    owner, pool = owner_of(request), _pool(request)
    return JSONResponse({"object": "list", "data": await pool.call(pool.listed, owner)})


async def get(request: Request) -> Response:
    session, pool = await _session(request), _pool(request)
    if session.last_result is None:  # no turn since it was opened: its log has the history
        return JSONResponse(await pool.call(lambda: session.describe(messages=True)))
    return JSONResponse(session.describe(messages=True))


async def delete(request: Request) -> Response:
    session, pool = await _session(request), _pool(request)
    with session.claimed():
        await pool.call(lambda: pool.close(session, delete=True))
    return JSONResponse({"id": session.id, "object": "session.deleted", "deleted": True})


async def interrupt(request: Request) -> Response:
    return JSONResponse({"interrupted": (await _session(request)).interrupt()})


def _message(body: dict[str, Any]) -> tuple[str, str | None, bool]:
    content, system = body.get("content"), body.get("system")
    if not isinstance(content, str) or not content.strip():
        raise oa.bad("Missing required parameter: 'content' (the user's message).", "content")
    if system is not None and not isinstance(system, str):
        raise oa.bad("Invalid type for 'system': expected a string.", "system")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise oa.bad("Invalid type for 'stream': expected a boolean.", "stream")
    return content, system, stream


async def message(request: Request) -> Response:
    content, system, stream = _message(_object(await json_body(request)))
    session, pool = await _session(request), _pool(request)
    if not stream:
        with session.claimed():
            result = await until_done(request, session, pool.turn(
                lambda: session.run(content, system_message=system)))
        return JSONResponse(session.agent.result_dict(result))
    session.claim()
    subscriber, unsubscribe = subscribe(session)
    try:
        worker, left = streamed_turn(pool, session,
                                     lambda: session.run(content, system_message=system))
    except BaseException:  # refused (503): no stream will drop the follower
        unsubscribe()
        raise

    async def body() -> AsyncIterator[bytes]:
        try:
            async for item in drain(subscriber.queue, worker, sse.KEEPALIVE):
                yield item if isinstance(item, bytes) else sse.encode(item, event=item["type"])
            result = await worker
        except Exception as exc:  # the turn could not run: the stream says why
            yield sse.encode(failure(exc).body(), event="error")
        else:
            yield sse.encode(session.agent.result_dict(result), event="result")
        yield sse.DONE
    return sse.EventStream(body(), on_disconnect=left, on_end=unsubscribe)


def subscribe(session: ServedSession) -> tuple[Subscriber, Callable[[], None]]:
    """A new follower of the session's events and deltas, and what drops it: the stream it
    feeds does, when it ends however it ends (``EventStream``'s ``on_end``)."""
    subscriber = Subscriber(asyncio.get_running_loop())
    session.subscribers.add(subscriber)
    return subscriber, lambda: session.subscribers.discard(subscriber)


async def events(request: Request) -> Response:
    """The session's events and deltas as they happen, until the client leaves or the session
    is closed."""
    session = await _session(request)
    subscriber, unsubscribe = subscribe(session)

    async def body() -> AsyncIterator[bytes]:
        yield sse.KEEPALIVE
        while True:
            try:
                item = await asyncio.wait_for(subscriber.queue.get(), timeout=KEEPALIVE_SECONDS)
            except TimeoutError:
                yield sse.KEEPALIVE
                continue
            yield sse.encode(item, event=item["type"])
            if item["type"] == "closed":
                yield sse.DONE
                return
    return sse.EventStream(body(), on_disconnect=lambda: None, on_end=unsubscribe)


def idle_action(action: Action) -> Callable[[Request], Any]:
    """A route running ``action(pool, session, body)`` in a worker on the owner's idle
    session (an action making a new session, as a fork does, gives it to the owner with
    ``pool.adopt``)."""
    async def handle(request: Request) -> Response:
        body = _object(await json_body(request))
        session, pool = await _session(request), _pool(request)
        with session.claimed():
            return JSONResponse(await pool.call(action, pool, session, body))
    return handle


def replay(pool: SessionPool, session: ServedSession, body: dict[str, Any]) -> dict[str, Any]:
    """Every log of the session re-run from the log and compared."""
    from pipeline.shell.replay import replay as replay_log
    root = session.agent.home / "sessions"
    reports = [replay_log(root, log_id) for log_id in session.lineage]
    return {"id": session.id, "object": "session.replay",
            "identical": all(r.identical for r in reports),
            "logs": [{"session_id": r.session_id, "identical": r.identical, "events": r.events,
                      "unfinished_tail": r.unfinished_tail,
                      "report": r.describe()} for r in reports]}


def fork(pool: SessionPool, session: ServedSession, body: dict[str, Any]) -> dict[str, Any]:
    """A new session of the same owner: the session's current log up to record ``at`` (all of
    it when absent), to go on from there with other messages. It keeps the settings in force
    there (a reopened session goes on with its own), so a fork changes no model; ``mibyan
    fork`` and ``Agent.fork`` do."""
    from pipeline.agent import fork_session
    unknown = sorted(set(body) - {"at"})
    if unknown:
        raise oa.bad(f"A fork takes only 'at' (a record number); not {', '.join(unknown)}.",
                     param=unknown[0])
    at = body.get("at")
    if at is not None and (not isinstance(at, int) or isinstance(at, bool)):
        raise oa.bad("'at' must be a record number (an integer).", param="at")
    forked = fork_session(session.agent, session.lineage[-1], at=at)
    forked.agent.close()
    pool.adopt(session.owner, forked.session_id, session.platform)
    answer = None if forked.continued is None else forked.continued.final_response
    return {"id": forked.session_id, "object": "session.fork", "forked_from": session.id,
            "origin_log": forked.origin_session_id, "origin_seq": forked.origin_seq,
            "answer": answer}


def rollback(pool: SessionPool, session: ServedSession, body: dict[str, Any]) -> dict[str, Any]:
    """The working tree put back as it was before turn ``turn`` (absent: the latest turn that
    took a checkpoint), recorded in the session. The answer names no server path."""
    unknown = sorted(set(body) - {"turn"})
    if unknown:
        raise oa.bad(f"A rollback takes only 'turn' (a turn number); not {', '.join(unknown)}.",
                     param=unknown[0])
    turn = body.get("turn")
    if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or turn < 1):
        raise oa.bad("'turn' must be a turn number (an integer from 1).", param="turn")
    done = session.agent.rollback(turn)
    if done.error is not None:
        found = done.commit is not None
        raise oa.bad("The working tree could not be restored." if found else
                     "Nothing to roll back to: the session has no checkpoint of that turn.",
                     param="turn")
    return {"id": session.id, "object": "session.rollback", "turn": done.turn,
            "checkpoint": done.commit, "saved": done.saved, "restored": done.restored,
            "removed": done.removed}


def export(pool: SessionPool, session: ServedSession, body: dict[str, Any]) -> dict[str, Any]:
    """The session's trajectory (its whole lineage, stitched) in ``format`` (sharegpt, openai
    or trl), as the samples themselves."""
    import json
    import tempfile
    from pathlib import Path

    from effects.eventlog.lineage import oldest
    from pipeline.export.exporter import export_sessions
    from pipeline.export.select import ExportFilters
    fmt = body.get("format", "sharegpt")
    if not isinstance(fmt, str):
        raise oa.bad("'format' must be sharegpt, openai or trl.", param="format")
    root = session.agent.home / "sessions"
    first = oldest(root, session.lineage[0])
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "export.jsonl"
        export_sessions(root, out, fmt=fmt, filters=ExportFilters(session_ids=(first,)))
        samples = [json.loads(line) for line in out.read_text().splitlines()]
    return {"id": session.id, "object": "session.export", "format": fmt, "samples": samples}


SESSION_ROUTES = [
    Route("/v1/sessions", create, methods=["POST"]),
    Route("/v1/sessions", listed, methods=["GET"]),
    Route("/v1/sessions/{session_id}", get, methods=["GET"]),
    Route("/v1/sessions/{session_id}", delete, methods=["DELETE"]),
    Route("/v1/sessions/{session_id}/messages", message, methods=["POST"]),
    Route("/v1/sessions/{session_id}/events", events, methods=["GET"]),
    Route("/v1/sessions/{session_id}/interrupt", interrupt, methods=["POST"]),
    Route("/v1/sessions/{session_id}/replay", idle_action(replay), methods=["POST"]),
    Route("/v1/sessions/{session_id}/fork", idle_action(fork), methods=["POST"]),
    Route("/v1/sessions/{session_id}/export", idle_action(export), methods=["POST"]),
    Route("/v1/sessions/{session_id}/rollback", idle_action(rollback), methods=["POST"]),
]
