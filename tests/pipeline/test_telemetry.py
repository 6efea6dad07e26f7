"""OpenTelemetry spans in the GenAI semantic conventions: live through the SDK (its in-memory
exporter, and the OTLP/HTTP exporter to a receiver on loopback decoding the protobuf), and from
a past session's log (``mibyan traces``)."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode

from effects.eventlog.store import read_envelopes, session_path
from pipeline import telemetry
from pipeline.agent import Agent
from pipeline.cli.main import main
from pipeline.telemetry import otlp
from pipeline.tools import tool
from tests.fake_openai import Reply, Usage

KEY = "sk-proj-ThisIsASecretKey0123456789"
# Every attribute name the conventions define for GenAI spans, and error.type.
CONVENTIONS = {v for k, v in vars(gen_ai).items() if k.startswith("GEN_AI_")} | {
    error_attributes.ERROR_TYPE}


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@pytest.fixture
def memory():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    yield exporter
    telemetry.uninstrument()


def a_turn_with_a_tool(server, home) -> str:
    server.script(Reply.tool_calls([("add", '{"a": 2, "b": 3}')], ids=["call_a"],
                                   usage=Usage(prompt=50, completion=7, cached=20)),
                  Reply.text("It is 5.", usage=Usage(prompt=80, completion=4)))
    with Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home,
               tools=[add]) as agent:
        assert agent.run("2 + 3?").final_response == "It is 5."
        sid = agent.session_id
    assert sid is not None
    return sid


def test_live_spans_follow_the_genai_conventions(server, home, memory):
    sid = a_turn_with_a_tool(server, home)
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert sorted(spans) == ["chat fake-model", "execute_tool add", "invoke_agent mibyan"]
    turn, tool_span = spans["invoke_agent mibyan"], spans["execute_tool add"]
    calls = [s for s in memory.get_finished_spans() if s.name == "chat fake-model"]
    assert len(calls) == 2
    for span in memory.get_finished_spans():
        assert set(span.attributes) <= CONVENTIONS, span.name
        assert span.attributes[gen_ai.GEN_AI_CONVERSATION_ID] == sid
        assert span.context.trace_id == turn.context.trace_id
    assert turn.parent is None and turn.kind is SpanKind.INTERNAL
    assert turn.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert turn.attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == 130
    assert turn.attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] == 11
    first = calls[0]
    assert first.kind is SpanKind.CLIENT and first.parent.span_id == turn.context.span_id
    assert first.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "chat"
    assert first.attributes[gen_ai.GEN_AI_PROVIDER_NAME] == "openai"
    assert first.attributes[gen_ai.GEN_AI_REQUEST_MODEL] == "fake-model"
    assert first.attributes[gen_ai.GEN_AI_RESPONSE_MODEL] == "fake-model"
    assert first.attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == 50  # cached ones included
    assert first.attributes[gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 20
    assert first.attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert tool_span.parent.span_id == turn.context.span_id
    assert tool_span.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert tool_span.attributes[gen_ai.GEN_AI_TOOL_NAME] == "add"
    assert tool_span.attributes[gen_ai.GEN_AI_TOOL_CALL_ID] == "call_a"
    assert first.end_time <= tool_span.start_time <= tool_span.end_time <= calls[1].start_time
    assert all(s.status.status_code is StatusCode.UNSET for s in spans.values())


def test_a_failed_call_has_its_error_type_and_no_secret(server, home, memory):
    server.script(Reply.error(400, f"bad key {KEY} in request", code="invalid_api_key"))
    with Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home) as agent:
        assert agent.run("hi").failed
    spans = {s.name: s for s in memory.get_finished_spans()}
    call, turn = spans["chat fake-model"], spans["invoke_agent mibyan"]
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes[error_attributes.ERROR_TYPE]
    assert turn.attributes[error_attributes.ERROR_TYPE] == "model_error"
    everything = repr([(s.name, dict(s.attributes), s.status.description)
                       for s in memory.get_finished_spans()])
    assert KEY not in everything


def test_traces_exports_a_past_session_with_the_logs_times(server, home, tmp_path, memory):
    sid = a_turn_with_a_tool(server, home)
    live = {s.name: dict(s.attributes) for s in memory.get_finished_spans()}
    out = tmp_path / "spans.json"
    assert main(["--home", str(home), "traces", sid, "-o", str(out)]) == 0
    body = json.loads(out.read_text())
    request = parse(json.loads(out.read_text()))  # the protobuf schema of OTLP accepts it
    spans = request.resource_spans[0].scope_spans[0].spans
    assert len(spans) == 4
    exported = {s.name: {a.key for a in s.attributes} for s in spans}
    assert exported == {name: set(attrs) for name, attrs in live.items()}
    turn = next(s for s in spans if s.name == "invoke_agent mibyan")
    times = [e.recorded_at for e in read_envelopes(session_path(home / "sessions", sid))
             if e.kind in ("turn_started", "turn_finished")]
    assert [turn.start_time_unix_nano, turn.end_time_unix_nano] == [
        round(otlp._epoch(t) * 1e9) for t in times]
    assert all(s.trace_id == turn.trace_id for s in spans)
    assert {s.parent_span_id for s in spans if s != turn} == {turn.span_id}
    # Exported again: the same ids.
    assert main(["--home", str(home), "traces", sid, "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == body


def parse(body: dict) -> ExportTraceServiceRequest:
    """OTLP JSON into the protobuf message: ids are hex there, base64 in protobuf's JSON."""
    for resource in body["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for field in ("traceId", "spanId", "parentSpanId"):
                    if field in span:
                        span[field] = base64.b64encode(bytes.fromhex(span[field])).decode()
    return json_format.ParseDict(body, ExportTraceServiceRequest())


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver on loopback: protobuf or JSON bodies on /v1/traces."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, ExportTraceServiceRequest]] = []
        self.arrived = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        kind = self.headers["content-type"]
        if kind == "application/x-protobuf":
            request = ExportTraceServiceRequest.FromString(body)
        else:
            request = parse(json.loads(body))
        self.server.requests.append((self.path, request))
        self.server.arrived.set()
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def receiver():
    with Receiver() as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield server
        server.shutdown()


def test_the_otlp_exporter_sends_live_spans_to_a_collector(server, home, receiver,
                                                           monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    telemetry.uninstrument()
    sid = a_turn_with_a_tool(server, home)
    telemetry.flush()
    assert receiver.arrived.wait(10)
    names = {}
    for path, request in receiver.requests:
        assert path == "/v1/traces"
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert service["service.name"] == "mibyan"
            for scope in resource.scope_spans:
                for span in scope.spans:
                    names[span.name] = {a.key: a.value for a in span.attributes}
    assert sorted(names) == ["chat fake-model", "execute_tool add", "invoke_agent mibyan"]
    assert names["execute_tool add"][gen_ai.GEN_AI_TOOL_CALL_ID].string_value == "call_a"
    assert names["invoke_agent mibyan"][gen_ai.GEN_AI_CONVERSATION_ID].string_value == sid


def test_traces_sends_to_a_collector(server, home, receiver):
    sid = a_turn_with_a_tool(server, home)
    assert main(["--home", str(home), "traces", sid, "--endpoint", receiver.url,
                 "--header", "x-team=agents"]) == 0
    (path, request), = receiver.requests
    assert path == "/v1/traces"
    assert len(request.resource_spans[0].scope_spans[0].spans) == 4


def test_traces_of_an_unknown_session_is_a_usage_error(home, capsys):
    assert main(["--home", str(home), "traces", "nope"]) == 2
    assert "no session 'nope'" in capsys.readouterr().err
