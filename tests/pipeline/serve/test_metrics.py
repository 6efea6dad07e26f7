"""``GET /metrics``: Prometheus' text format (parsed by ``prometheus_client``'s own parser),
counting requests, turns, tokens, tool calls, errors and sessions; guarded like the other
routes."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipeline.serve.gateway_config import serve_config
from stages.errors import UsageError
from tests.fake_openai import Reply, Usage
from tests.pipeline.serve.conftest import TOKENS, start_gateway


def scrape(gateway, owner: str = "alice") -> dict[tuple[str, tuple], float]:
    with gateway.client(owner) as client:
        response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples}


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_requests_turns_tokens_tools_and_errors(gateway, tmp_path):
    (tmp_path / "work" / "a.txt").write_text("alpha")
    gateway.upstream.script(
        Reply.tool_calls([("read_file", '{"path": "a.txt"}'), ("no_such_tool", "{}")],
                         usage=Usage(prompt=50, completion=7)),
        Reply.text("It says alpha.", usage=Usage(prompt=80, completion=4, cached=20)),
        Reply.error(400, "bad request upstream"))
    with gateway.client() as client:
        ok = client.post("/v1/chat/completions", json={
            "model": "mibyan", "messages": [{"role": "user", "content": "read a.txt"}]})
        bad = client.post("/v1/chat/completions", json={
            "model": "mibyan", "messages": [{"role": "user", "content": "again"}]})
        refused = client.post("/v1/chat/completions", json={"model": "mibyan"})
    assert (ok.status_code, bad.status_code, refused.status_code) == (200, 502, 400)
    samples = scrape(gateway)
    route = "/v1/chat/completions"
    assert value(samples, "mibyan_gateway_requests_total", route=route, method="POST",
                 status="200") == 1
    assert value(samples, "mibyan_gateway_requests_total", route=route, method="POST",
                 status="502") == 1
    assert value(samples, "mibyan_gateway_requests_total", route=route, method="POST",
                 status="400") == 1
    assert value(samples, "mibyan_gateway_request_duration_seconds_count", route=route) == 3
    assert value(samples, "mibyan_gateway_turns_total", exit="text_response") == 1
    assert value(samples, "mibyan_gateway_turns_total", exit="model_error") == 1
    assert value(samples, "mibyan_gateway_turn_duration_seconds_count") == 2
    assert value(samples, "mibyan_gateway_model_calls_total", model="fake-model",
                 outcome="ok") == 2
    assert value(samples, "mibyan_gateway_tokens_total", model="fake-model",
                 kind="output") == 11
    assert value(samples, "mibyan_gateway_tokens_total", model="fake-model",
                 kind="cache_read") == 20
    assert value(samples, "mibyan_gateway_tool_calls_total", tool="read_file",
                 outcome="ok") == 1
    assert value(samples, "mibyan_gateway_tool_calls_total", tool="no_such_tool",
                 outcome="rejected") == 1
    assert value(samples, "mibyan_gateway_tool_duration_seconds_count", tool="read_file") == 1
    assert value(samples, "mibyan_gateway_errors_total", kind="model_call") >= 1
    assert value(samples, "mibyan_gateway_errors_total", kind="turn") == 1
    assert value(samples, "mibyan_gateway_open_sessions") == 2
    assert value(samples, "mibyan_gateway_busy_sessions") == 0
    # No label names an owner or a session.
    assert not any(v in ("alice", ok.headers["x-mibyan-session-id"])
                   for _, labels in samples for _, v in labels)


def test_metrics_need_a_token_and_a_gateway_host(gateway):
    with gateway.client(owner=None) as client:
        assert client.get("/metrics").status_code == 401
        foreign = client.get("/metrics", headers={"Host": "evil.example",
                                                  "Authorization": f"Bearer {TOKENS['bob']}"})
    assert foreign.status_code == 421


def test_metrics_owners_limits_who_reads_them(upstream, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    for gateway in start_gateway(upstream, tmp_path / "home", workdir,
                                 serve={"metrics_owners": ["bob"]}):
        with gateway.client("alice") as client:
            denied = client.get("/metrics")
        assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"
        assert value(scrape(gateway, "bob"), "mibyan_gateway_requests_total",
                     route="/metrics", method="GET", status="403") == 1


def test_metrics_owners_must_be_owners():
    with pytest.raises(UsageError, match="metrics_owners names no owner"):
        serve_config({"serve": {"tokens": {"a": "T"}, "metrics_owners": ["ops"]}},
                     env={"T": "tok-0123456789"})
