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

from pipeline.serve import guard, routes, sse
from pipeline.serve import openai_compat as oa
from pipeline.serve.completion import SESSION_HEADER, chat_session, chat_turn, failed
from pipeline.serve.gateway_config import ServeConfig
from pipeline.serve.metrics import GatewayMetrics, MetricsMiddleware
from pipeline.serve.plumbing import (
    drain,
    failure,
    json_body,
    owner_of,
    session_of,
    streamed_turn,
    until_done,
)
from pipeline.serve.pool import SessionPool
from pipeline.serve.responses_route import responses
from pipeline.serve.sessions import ServedSession
from pipeline.serve.waiting import WAITING_ROUTES
from stages.errors import MibyanError


async def list_models(request: Request) -> Response:
    owner_of(request)
    return JSONResponse(oa.models_body(request.app.state.models, request.app.state.started))


async def metrics(request: Request) -> Response:
    """Prometheus' text format, for a token of ``[serve] metrics_owners`` (every owner's
    when it is not set): the numbers are the whole gateway's, no owner's or session's."""
    owner = owner_of(request)
    config: ServeConfig = request.app.state.config
    if config.metrics_owners is not None and owner not in config.metrics_owners:
        raise oa.ApiError(403, "This token may not read the gateway's metrics ([serve] "
                          "metrics_owners).", type="permission_error", code="forbidden")
    body, media_type = request.app.state.metrics.exposition()
    return Response(body, media_type=media_type)


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def chat_completions(request: Request) -> Response:
    owner = owner_of(request)
    pool: SessionPool = request.app.state.pool
    body = await json_body(request)
    wanted = request.headers.get(SESSION_HEADER)
    models = request.app.state.models
    found = await session_of(request, owner, wanted) if wanted else None
    if found is not None:  # the session's own model too, when the gateway no longer serves it
        models = (*models, found.agent.settings.model)
    chat = oa.parse_chat_request(body, models)
    session, history = await chat_session(request, owner, chat, wanted, found)
    completion = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    headers = {SESSION_HEADER: session.id}
    if chat.stream:
        return _stream(request, session, chat, history, completion, headers)
    with session.claimed():
        result = await until_done(request, session, pool.turn(
            lambda: chat_turn(pool, session, chat, history)))
    refused = failed(result)
    if refused is not None:
        raise refused
    return JSONResponse(oa.completion_body(completion, int(time.time()), chat.model, result),
                        headers=headers)


def _stream(request: Request, session: ServedSession, chat: oa.ChatRequest, history: Any,
            completion: str, headers: dict[str, str]) -> Response:
    """Deltas as ``chat.completion.chunk`` events while the turn runs in a worker; a client
    that leaves interrupts the turn, or cancels it while it waits for a worker. A turn that
    failed with no answer ends in OpenAI's error object. A structured answer
    (``response_format``) comes in one chunk once it was checked."""
    pool: SessionPool = request.app.state.pool
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str] = asyncio.Queue()
    session.claim()  # 409 now, before the stream starts; the worker releases it
    worker, left = streamed_turn(pool, session, lambda: chat_turn(
        pool, session, chat, history, on_delta=None if chat.output is not None
        else lambda t: loop.call_soon_threadsafe(queue.put_nowait, t)))
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
            refused = failed(result)
            if refused is not None:  # as the 502 would say it
                yield sse.encode(refused.body())
            else:
                if chat.output is not None:  # only the checked answer, not every attempt
                    yield chunk({"content": result.final_response})
                if result.tool_calls:  # the calls to the client's tools, whole
                    yield chunk(oa.tool_call_deltas(result.tool_calls))
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


def _middleware(config: ServeConfig, counted: GatewayMetrics, pool: SessionPool
                ) -> list[Middleware]:
    """The metrics (every request, refusals too), the request guard
    (``pipeline.serve.guard``); CORS only for configured origins, which the guard lets
    through."""
    chain = [Middleware(MetricsMiddleware, metrics=counted),
             Middleware(guard.RequestGuard, config=config, admission=pool.admission)]
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

    counted = GatewayMetrics()
    pool.observer = counted.listener
    counted.watch(lambda: pool.counts()[0], lambda: pool.counts()[1])
    handlers: Any = dict.fromkeys((Exception, HTTPException, oa.ApiError, MibyanError), _error)
    app = Starlette(routes=[
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        *routes.SESSION_ROUTES,
        *WAITING_ROUTES,
    ], exception_handlers=handlers, lifespan=lifespan,
        middleware=_middleware(config, counted, pool))
    app.state.pool, app.state.config, app.state.metrics = pool, config, counted
    app.state.models = tuple(dict.fromkeys(models))
    app.state.started = int(time.time())
    return app
