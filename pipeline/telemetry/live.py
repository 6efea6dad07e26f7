"""Live spans: each agent's session events become OpenTelemetry spans as they are logged
(``pipeline.telemetry.spans``), through the SDK (the ``otel`` extra), when an exporter is
configured:

* in the library, ``instrument(tracer_provider)`` (any SDK ``TracerProvider``: an OTLP
  exporter, the console, the SDK's in-memory exporter in tests), for agents made afterwards;
* or ``[telemetry] otlp_endpoint = "http://collector:4318"`` in config.toml (with
  ``headers = {...}`` and ``service_name``), or the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (and ``..._HEADERS``) variables: spans go over
  OTLP/HTTP (protobuf) in batches.

Without either, nothing is imported and nothing is paid.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pipeline import config as cfg
from pipeline.telemetry.spans import Closed, Opened, SpanPlan
from stages.errors import UsageError
from stages.log.events import Event

__all__ = ["LiveSpans", "configured", "flush", "instrument", "live_spans", "uninstrument"]

_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_lock = threading.Lock()
_chosen: list[Any] = []  # [provider] once instrument() was called (None: traced by no one)
_built: dict[tuple[str, tuple[tuple[str, str], ...], str], Any] = {}


def instrument(tracer_provider: Any = None) -> None:
    """Agents made from now on send their spans to ``tracer_provider`` (None: no agent
    does, whatever config.toml or the environment say)."""
    with _lock:
        _chosen[:] = [tracer_provider]


def uninstrument() -> None:
    """Forget ``instrument``: agents made from now on follow config.toml and the environment
    again."""
    with _lock:
        _chosen.clear()


def flush(timeout_millis: int = 30_000) -> None:
    """Send the spans still waiting in the batches of the exporters config.toml or the
    environment set up (as happens at exit)."""
    with _lock:
        providers = list(_built.values())
    for provider in providers:
        provider.force_flush(timeout_millis)


def _otel_missing(exc: ImportError) -> UsageError:
    return UsageError(f"OpenTelemetry is configured but not installed ({exc.name}); install "
                      "the otel extra: pip install 'mibyan[otel]'")


def _from_settings(home: Path, env: Mapping[str, str]) -> Any:
    """The provider config.toml or the environment ask for, built once per process."""
    section = cfg.load_file(home).get("telemetry", {})
    if not isinstance(section, dict):
        raise UsageError("[telemetry] in config.toml must be a table")
    endpoint = section.get("otlp_endpoint")
    from_env = any(env.get(name) for name in _ENDPOINT_VARS)
    if endpoint is None and not from_env:
        return None
    if endpoint is not None and not isinstance(endpoint, str):
        raise UsageError("[telemetry] otlp_endpoint must be a URL (a string)")
    headers = section.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise UsageError("[telemetry] headers must be a table of strings")
    service = section.get("service_name", "mibyan")
    key = (endpoint or "", tuple(sorted(headers.items())), str(service))
    with _lock:
        if key not in _built:
            _built[key] = _otlp_provider(endpoint, headers, str(service))
        return _built[key]


def _otlp_provider(endpoint: str | None, headers: Mapping[str, str], service: str) -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise _otel_missing(exc) from exc
    if endpoint is not None:  # the exporter reads the variables itself; a base gets the path
        endpoint = endpoint.rstrip("/")
        endpoint = endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=endpoint, headers=dict(headers) or None)))
    atexit.register(provider.shutdown)  # the last batch leaves before the process does
    return provider


def configured(home: Path | None, env: Mapping[str, str] | None = None) -> Any:
    """The tracer provider of an agent: ``instrument``'s, else (for an agent built from
    config, whose ``home`` is given) the exporter config.toml or the environment name; None
    when spans go nowhere."""
    with _lock:
        chosen = list(_chosen)
    if chosen:
        return chosen[0]
    if home is None:
        return None
    return _from_settings(home, os.environ if env is None else env)


def live_spans(provider: Any, known: Iterable[str],
               session_id: Callable[[], str | None]) -> LiveSpans | None:
    """The span listener of a session, or None without a provider."""
    if provider is None:
        return None
    return LiveSpans(provider.get_tracer("mibyan"), known, session_id)


class LiveSpans:
    """An event listener that opens and ends SDK spans as ``SpanPlan`` says."""

    def __init__(self, tracer: Any, known: Iterable[str],
                 session_id: Callable[[], str | None]) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise _otel_missing(exc) from exc
        self._trace = trace
        self._tracer = tracer
        self._plan = SpanPlan(known)
        self._session_id = session_id
        self._open: dict[str, Any] = {}

    def __call__(self, event: Event) -> None:
        at = time.time()
        for change in self._plan.feed(event, at, self._session_id() or ""):
            if isinstance(change, Opened):
                self._start(change)
            else:
                self._end(change)

    def _start(self, opened: Opened) -> None:
        trace = self._trace
        parent = self._open.get(opened.parent) if opened.parent else None
        context = trace.set_span_in_context(parent) if parent is not None else None
        self._open[opened.key] = self._tracer.start_span(
            opened.name, context=context, start_time=round(opened.at * 1e9),
            kind=trace.SpanKind.CLIENT if opened.client else trace.SpanKind.INTERNAL,
            attributes=dict(opened.attributes))

    def _end(self, closed: Closed) -> None:
        span = self._open.pop(closed.key, None)
        if span is None:
            return
        span.set_attributes(dict(closed.attributes))
        if closed.error is not None:
            span.set_attribute("error.type", closed.error)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, closed.error))
        span.end(end_time=round(closed.at * 1e9))
