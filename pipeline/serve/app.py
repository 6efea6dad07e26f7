"""The gateway's ASGI app (Starlette): OpenAI's ``/v1/chat/completions`` and ``/v1/models``,
and the session API (``pipeline.serve.routes``).

    app = create_app(pool, config, models=("mibyan", "gpt-4o-mini"))
    uvicorn.run(app, host=config.host, port=config.port)

Every route but ``/health`` needs ``Authorization: Bearer <token>``; every refusal is OpenAI's
error body ``{"error": {"message", "type", "param", "code"}}``. A chat completion without the
``X-Mibyan-Session-Id`` header starts a new session (the request's messages are its history,
as OpenAI's API is stateless); with it, the message goes on in that session. The answer names
its session in the same header.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from pipeline.result import TurnResult
from pipeline.serve import guard, routes, sse
from pipeline.serve import openai_compat as oa
from pipeline.serve.gateway_config import AGENT_MODEL, ServeConfig
from pipeline.serve.plumbing import (
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
from pipeline.serve.sessions import ServedSession
from stages.errors import MibyanError

SESSION_HEADER = "x-mibyan-session-id"


async def list_models(request: Request) -> Response:
    owner_of(request)
    return JSONResponse(oa.models_body(request.app.state.models, request.app.state.started))


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def chat_completions(request: Request) -> Response:
    owner = owner_of(request)
    pool: SessionPool = request.app.state.pool
    body = await json_body(request)
    wanted = request.headers.get(SESSION_HEADER)
    if wanted:  # the session's own history is the context: only the last message is new
        session = await session_of(request, owner, wanted)
        own = session.agent.settings.model
        chat = oa.parse_chat_request(body, (*request.app.state.models, own))
        _same_model(session, chat.model)
        history = None
    else:
        chat = oa.parse_chat_request(body, request.app.state.models)
        session = await created(request, owner, "api")
        history = chat.history
    completion = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    headers = {SESSION_HEADER: session.id}
    if chat.stream:
        return _stream(request, session, chat, history, completion, headers)
    with session.claimed():
        result = await until_done(request, session, pool.turn(
            lambda: session.run(chat.user_message, system_message=chat.system_message,
                                history=history)))
    refused = _failed(result)
    if refused is not None:
        raise refused
    return JSONResponse(oa.completion_body(completion, int(time.time()), chat.model, result),
                        headers=headers)


def _same_model(session: ServedSession, named: str) -> None:
    """A session goes on with the model it recorded; a request naming another model for it is
    refused rather than answered by a model it did not ask for (``mibyan`` names whichever)."""
    own = session.agent.settings.model
    if named not in (AGENT_MODEL, own):
        raise oa.ApiError(409, f"Session {session.id!r} runs on the model `{own}`, not "
                               f"`{oa.echoed(named)}`: send `{own}` or `{AGENT_MODEL}` with it, "
                               "or start a new session for another model.", param="model",
                          code="session_model_mismatch")


def _failed(result: TurnResult) -> oa.ApiError | None:
    """A turn that failed with no answer, as the 502 its client gets (the session made its
    error one a client may see)."""
    if result.failed and not result.final_response:
        return oa.ApiError(502, f"The agent's turn failed: {result.error}", type="api_error",
                           code="upstream_failed")
    return None


def _stream(request: Request, session: ServedSession, chat: oa.ChatRequest, history: Any,
            completion: str, headers: dict[str, str]) -> Response:
    """Deltas as ``chat.completion.chunk`` events while the turn runs in a worker; a client
    that leaves interrupts the turn, or cancels it while it waits for a worker. A turn that
    failed with no answer ends in OpenAI's error object."""
    pool: SessionPool = request.app.state.pool
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str] = asyncio.Queue()
    session.claim()  # 409 now, before the stream starts; the worker releases it
    worker, left = streamed_turn(pool, session, lambda: session.run(
        chat.user_message, system_message=chat.system_message, history=history,
        on_delta=lambda t: loop.call_soon_threadsafe(queue.put_nowait, t)))
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse.encode(oa.chunk_body(completion, created, chat.model, delta=delta,
                                        finish=finish, include_usage=chat.include_usage))

    async def body() -> AsyncIterator[bytes]:
        yield chunk({"role": "assistant", "content": ""})
        async for text in drain(queue, worker, sse.KEEPALIVE):
            yield text if isinstance(text, bytes) else chunk({"content": text})
        try:
            result = await worker
        except Exception as exc:  # the turn could not run: say so in the stream, as OpenAI does
            yield sse.encode(failure(exc).body())
        else:
            refused = _failed(result)
            if refused is not None:  # as the 502 would say it
                yield sse.encode(refused.body())
            else:
                yield chunk({}, oa.finish_reason(result))
                if chat.include_usage:
                    yield sse.encode(oa.usage_chunk(completion, created, chat.model,
                                                    result.usage))
        yield sse.DONE
    return sse.EventStream(body(), on_disconnect=left, headers=headers)


async def _error(request: Request, exc: Exception) -> Response:
    error = failure(exc)
    headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else dict(error.headers)
    if error.status == 405:
        headers["Allow"] = _allowed(request)
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _allowed(request: Request) -> str:
    """The methods the request's path accepts (RFC 9110's ``Allow`` of a 405). Starlette's
    names those of the first route of the path only, and several routes share a path here
    (``GET`` and ``POST /v1/sessions``)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


def _middleware(config: ServeConfig) -> list[Middleware]:
    """The request guard first (``pipeline.serve.guard``); CORS only for configured origins,
    which the guard lets through."""
    chain = [Middleware(guard.RequestGuard, config=config)]
    if config.cors_origins:
        chain.append(Middleware(CORSMiddleware, allow_origins=config.cors_origins,
                                allow_methods=guard.CORS_METHODS,
                                allow_headers=guard.CORS_HEADERS,
                                expose_headers=(SESSION_HEADER,), max_age=600))
    return chain


def create_app(pool: SessionPool, config: ServeConfig, *, models: Sequence[str]) -> Starlette:
    """The app; when the server stops, running turns are interrupted and the agents closed.
    Requests pass ``pipeline.serve.guard`` first."""
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(pool.shutdown)

    handlers: Any = dict.fromkeys((Exception, HTTPException, oa.ApiError, MibyanError), _error)
    app = Starlette(routes=[
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        *routes.SESSION_ROUTES,
    ], exception_handlers=handlers, lifespan=lifespan, middleware=_middleware(config))
    app.state.pool, app.state.config = pool, config
    app.state.models = tuple(dict.fromkeys(models))
    app.state.started = int(time.time())
    return app
