"""``[serve] max_busy``: past that many turns running or waiting, a turn is refused at once
with 503 ``server_busy`` and a ``Retry-After`` (it never runs, and leaves its session free)."""

from __future__ import annotations

import threading

import httpx2
import pytest

from pipeline.serve.gateway_config import MAX_BUSY, serve_config
from stages.errors import UsageError
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.serve.conftest import start_gateway


class GatedServer(FakeOpenAIServer):
    """Holds every request until ``gate`` is set (bounded), counting the arrivals."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gate = threading.Event()
        self.arrivals = threading.Semaphore(0)

    def _record(self, body, headers):
        try:
            return super()._record(body, headers)
        finally:
            self.arrivals.release()
            self.gate.wait(30)


def _arrived(server: GatedServer, n: int) -> None:
    for _ in range(n):
        assert server.arrivals.acquire(timeout=30), "the upstream call never came"


@pytest.fixture
def gated(tmp_path):
    with GatedServer(default=Reply.text("done")) as upstream:
        work = tmp_path / "work"
        work.mkdir()
        gateways = start_gateway(upstream, tmp_path / "home", work, serve={"max_busy": 2})
        gateway = next(gateways)
        try:
            yield gateway, upstream
        finally:
            upstream.gate.set()
            gateways.close()


def _refused(response: httpx2.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "2"
    error = response.json()["error"]
    assert error["code"] == "server_busy" and error["type"] == "server_error"


def test_past_max_busy_a_turn_is_refused_at_once_and_runs_later(gated):
    gateway, upstream = gated
    with gateway.client() as client:
        ids = [client.post("/v1/sessions").json()["id"] for _ in range(3)]
        answers: list[httpx2.Response] = []
        running = [threading.Thread(target=lambda sid=sid: answers.append(client.post(
            f"/v1/sessions/{sid}/messages", json={"content": "slow"}))) for sid in ids[:2]]
        for thread in running:
            thread.start()
        _arrived(upstream, 2)
        assert gateway.pool.busy == 2
        _refused(client.post(f"/v1/sessions/{ids[2]}/messages", json={"content": "now"}))
        _refused(client.post(f"/v1/sessions/{ids[2]}/messages",
                             json={"content": "now", "stream": True}))
        _refused(client.post("/v1/chat/completions", json={
            "model": "mibyan", "messages": [{"role": "user", "content": "hi"}]}))
        _refused(client.post("/v1/chat/completions", json={
            "model": "mibyan", "stream": True, "messages": [{"role": "user", "content": "hi"}]}))
        # Listing and describing sessions do not count as turns.
        assert client.get("/v1/sessions").status_code == 200
        upstream.gate.set()
        for thread in running:
            thread.join(30)
        assert [a.status_code for a in answers] == [200, 200]
        assert gateway.pool.busy == 0
        # The refused session was left free: its turn runs now, streamed or not.
        later = client.post(f"/v1/sessions/{ids[2]}/messages", json={"content": "now"})
        assert later.status_code == 200 and later.json()["final_response"] == "done"
        streamed = client.post(f"/v1/sessions/{ids[2]}/messages",
                               json={"content": "again", "stream": True})
        assert streamed.status_code == 200 and "event: result" in streamed.text
        described = client.get(f"/v1/sessions/{ids[2]}").json()
        assert described["turns"] == 2 and not described["busy"]
    assert gateway.pool.busy == 0
    assert gateway.assert_every_session_replays() >= 3


def test_max_busy_is_read_from_serve_and_checked():
    env = {"T": "tok-0123456789"}
    tokens = {"tokens": {"a": "T"}}
    assert serve_config({"serve": tokens}, env=env).max_busy == MAX_BUSY == 256
    assert serve_config({"serve": {**tokens, "max_busy": 8}}, env=env).max_busy == 8
    with pytest.raises(UsageError, match="max_busy must be at least 1"):
        serve_config({"serve": {**tokens, "max_busy": 0}}, env=env)
    with pytest.raises(UsageError, match="max_busy must be a whole number"):
        serve_config({"serve": {**tokens, "max_busy": "8"}}, env=env)
