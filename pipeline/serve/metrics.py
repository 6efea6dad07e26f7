"""The gateway's Prometheus metrics (``GET /metrics``, the text exposition format): HTTP
requests and their latency by route, turns by how they ended and their duration, model calls,
tokens, tool calls, errors, open and busy sessions.

The numbers come from two places: an ASGI middleware sees every request (refusals by the
guard included), and every session's event listener sees its events as they are logged
(``observe``), so a turn's tokens are counted once, as recorded. Labels are bounded: a route is
its path template (``/v1/sessions/{session_id}``), an exit reason loses its detail
(``text_response``), and no label names an owner or a session.

Each app has its own registry, so two gateways in one process (tests) never share counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.routing import Match, Route

from stages.log.events import (
    Event,
    ModelFailed,
    ModelReplied,
    ToolCallRejected,
    ToolRan,
    TurnFinished,
    TurnStarted,
)

# Seconds: a tool or a model call takes milliseconds to minutes, a turn up to many minutes.
_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_TOKEN_KINDS = ("input", "output", "cache_read", "cache_write", "reasoning")


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("mibyan_gateway_requests", "HTTP requests answered.",
                                ("route", "method", "status"), registry=r)
        self.request_seconds = Histogram(
            "mibyan_gateway_request_duration_seconds",
            "From a request's arrival to the end of its answer (a stream's last byte).",
            ("route",), buckets=_BUCKETS, registry=r)
        self.turns = Counter("mibyan_gateway_turns", "Turns finished, by how they ended.",
                             ("exit",), registry=r)
        self.turn_seconds = Histogram("mibyan_gateway_turn_duration_seconds",
                                      "A turn's duration.", buckets=_BUCKETS, registry=r)
        self.model_calls = Counter("mibyan_gateway_model_calls", "Model calls.",
                                   ("model", "outcome"), registry=r)
        self.model_seconds = Histogram("mibyan_gateway_model_call_duration_seconds",
                                       "A model call's latency.", ("model",),
                                       buckets=_BUCKETS, registry=r)
        self.tokens = Counter("mibyan_gateway_tokens", "Tokens of model calls.",
                              ("model", "kind"), registry=r)
        self.tool_calls = Counter("mibyan_gateway_tool_calls",
                                  "Tool calls the agents ran or refused (clients' tools are "
                                  "theirs to count).", ("tool", "outcome"), registry=r)
        self.tool_seconds = Histogram("mibyan_gateway_tool_duration_seconds",
                                      "A tool run's duration.", ("tool",), buckets=_BUCKETS,
                                      registry=r)
        self.errors = Counter("mibyan_gateway_errors",
                              "Errors: failed model calls and turns, server errors (5xx).",
                              ("kind",), registry=r)
        self.open_sessions = Gauge("mibyan_gateway_open_sessions",
                                   "Sessions open in this process.", registry=r)
        self.busy_sessions = Gauge("mibyan_gateway_busy_sessions",
                                   "Sessions running a turn.", registry=r)

    def watch(self, open_count: Callable[[], int], busy_count: Callable[[], int]) -> None:
        """The session gauges, read when scraped."""
        self.open_sessions.set_function(open_count)
        self.busy_sessions.set_function(busy_count)

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def listener(self, then: Callable[[Event], None]) -> Callable[[Event], None]:
        """A session's event listener counting its events, then passing them on."""
        started: list[float] = []

        def listen(event: Event) -> None:
            if isinstance(event, TurnStarted):
                started[:] = [time.monotonic()]
            elif isinstance(event, TurnFinished) and started:
                self.turn_seconds.observe(time.monotonic() - started.pop())
            self.observe(event)
            then(event)
        return listen

    def observe(self, event: Event) -> None:
        if isinstance(event, ModelReplied):
            self.model_calls.labels(event.model, "ok").inc()
            self.model_seconds.labels(event.model).observe(event.latency_ms / 1000)
            usage = event.usage
            counts = (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                      usage.cache_write_tokens, usage.reasoning_tokens)
            for kind, count in zip(_TOKEN_KINDS, counts, strict=True):
                if count:
                    self.tokens.labels(event.model, kind).inc(count)
        elif isinstance(event, ModelFailed):
            self.model_calls.labels("", "failed").inc()
            self.errors.labels("model_call").inc()
        elif isinstance(event, ToolRan):
            outcome = event.outcome
            self.tool_calls.labels(outcome.name, "ok" if outcome.ok else "error").inc()
            self.tool_seconds.labels(outcome.name).observe(outcome.duration_ms / 1000)
        elif isinstance(event, ToolCallRejected):
            self.tool_calls.labels(event.call.name, "rejected").inc()
        elif isinstance(event, TurnFinished):
            self.turns.labels(event.exit_reason.split("(")[0]).inc()
            if event.failed:
                self.errors.labels("turn").inc()


Scope = MutableMapping[str, Any]


class MetricsMiddleware:
    """Counts every HTTP request by route template, method and status, and times it."""

    def __init__(self, app: Any, *, metrics: GatewayMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.monotonic(), [500]

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)
        try:
            await self.app(scope, receive, sending)
        finally:
            route = _route(scope)
            self.metrics.requests.labels(route, scope["method"], str(status[0])).inc()
            self.metrics.request_seconds.labels(route).observe(time.monotonic() - start)
            if status[0] >= 500:
                self.metrics.errors.labels("http_5xx").inc()


def _route(scope: Scope) -> str:
    """The path template of the route the request went to ("other" for no route)."""
    app = scope.get("app")
    for route in getattr(getattr(app, "router", None), "routes", ()):
        if isinstance(route, Route) and route.matches(scope)[0] is not Match.NONE:
            return route.path
    return "other"
