"""A past session's spans from its log, as OTLP JSON (``mibyan traces SESSION``): the
``ExportTraceServiceRequest`` of OTLP/HTTP with the JSON encoding, written to a file or sent
to a collector's ``/v1/traces``.

The spans' times are the log's (``recorded_at``), their ids drawn from the session's id and the
span's place in it, so exporting a session twice gives the same trace (a collector can drop the
duplicate) and a session's turns keep their trace ids across exports.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.telemetry.spans import Attributes, Closed, Opened, SpanPlan
from stages.errors import UsageError

SCOPE = "mibyan"
# OTLP's SpanKind values.
_INTERNAL, _CLIENT = 1, 3
_ERROR = 2  # Status.code STATUS_CODE_ERROR


def _id(session_id: str, key: str, size: int) -> str:
    return hashlib.sha256(f"{session_id}/{key}".encode()).hexdigest()[:size * 2]


def _nanos(at: float) -> str:
    return str(round(at * 1e9))


def _value(value: str | int | tuple[str, ...]) -> dict[str, Any]:
    if isinstance(value, tuple):
        return {"arrayValue": {"values": [{"stringValue": v} for v in value]}}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 is a string in OTLP JSON
    return {"stringValue": value}


def _attributes(attributes: Attributes) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in attributes.items()]


def _epoch(recorded_at: str) -> float:
    return dt.datetime.fromisoformat(recorded_at.replace("Z", "+00:00")).timestamp()


def session_spans(root: Path, session_id: str, *, known: Iterable[str] = ()
                  ) -> list[dict[str, Any]]:
    """The OTLP JSON spans of session ``session_id``'s log under ``root``."""
    path = session_path(root, session_id)
    if not path.exists():
        raise UsageError(f"no session {session_id!r} under {root}")
    return list(_spans(((from_payload(e.kind, e.schema_version, e.payload),
                         _epoch(e.recorded_at)) for e in read_envelopes(path)),
                       session_id, known))


def _spans(events: Iterable[tuple[Any, float]], session_id: str, known: Iterable[str]
           ) -> Iterator[dict[str, Any]]:
    plan = SpanPlan(known)
    open_: dict[str, tuple[Opened, str]] = {}  # key -> (opened, trace id)
    for event, at in events:
        for change in plan.feed(event, at, session_id):
            if isinstance(change, Opened):
                root = change.parent or change.key
                open_[change.key] = (change, _id(session_id, root, 16))
                continue
            opened, trace = open_.pop(change.key)
            yield _span(session_id, opened, change, trace)


def _span(session_id: str, opened: Opened, closed: Closed, trace: str) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace, "spanId": _id(session_id, opened.key, 8), "name": opened.name,
        "kind": _CLIENT if opened.client else _INTERNAL,
        "startTimeUnixNano": _nanos(opened.at), "endTimeUnixNano": _nanos(closed.at),
        "attributes": _attributes({**opened.attributes, **closed.attributes,
                                   **({"error.type": closed.error} if closed.error else {})}),
        "status": {"code": _ERROR, "message": closed.error} if closed.error else {}}
    if opened.parent is not None:
        span["parentSpanId"] = _id(session_id, opened.parent, 8)
    return span


def request(spans: list[dict[str, Any]], *, service: str = "mibyan") -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` (OTLP JSON) of ``spans``."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        scope_version = version("mibyan")
    except PackageNotFoundError:
        scope_version = "0"
    return {"resourceSpans": [{
        "resource": {"attributes": _attributes({"service.name": service})},
        "scopeSpans": [{"scope": {"name": SCOPE, "version": scope_version},
                        "spans": spans}]}]}


def send(body: Mapping[str, Any], endpoint: str, *, headers: Mapping[str, str] = {},
         timeout: float = 10.0) -> None:
    """POST ``body`` to an OTLP/HTTP collector: ``endpoint`` is its base (``/v1/traces`` is
    added, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is read) or the full traces URL."""
    url = endpoint if endpoint.rstrip("/").endswith("/v1/traces") else (
        endpoint.rstrip("/") + "/v1/traces")
    data = json.dumps(body).encode()
    call = urllib.request.Request(url, data=data, method="POST", headers={
        "content-type": "application/json", **headers})
    try:
        with urllib.request.urlopen(call, timeout=timeout) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        raise UsageError(f"the collector at {url} refused the spans: HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"cannot reach the collector at {url}: {reason}") from exc
