"""``[serve] max_busy``: past that many turns running or waiting, a turn is refused at once
with 503 ``server_busy`` and a ``Retry-After`` (it never runs, and leaves its session free)
that grows with the number refused; the openai SDK waits for it."""

from __future__ import annotations

import threading
import time

import httpx2
import openai
import pytest

from pipeline.serve.admission import default_max_busy
from pipeline.serve.gateway_config import serve_config
from stages.errors import UsageError
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.serve.conftest import TOKENS, start_gateway


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


def _gated(tmp_path, **serve):
    with GatedServer(default=Reply.text("done")) as upstream:
        work = tmp_path / "work"
        work.mkdir()
        gateways = start_gateway(upstream, tmp_path / "home", work, serve=serve)
        gateway = next(gateways)
        try:
            yield gateway, upstream
        finally:
            upstream.gate.set()
            gateways.close()


@pytest.fixture
def gated(tmp_path):
    yield from _gated(tmp_path, max_busy=2)


def _refused(response: httpx2.Response) -> float:
    """The wait the 503 tells, in seconds."""
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == "server_busy" and error["type"] == "server_error"
    wait = int(response.headers["retry-after-ms"]) / 1000
    assert int(response.headers["retry-after"]) == -(-wait // 1) >= 1
    return wait


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
        logs = sorted((gateway.home / "sessions").glob("*.jsonl"))
        waits = [
            _refused(client.post(f"/v1/sessions/{ids[2]}/messages", json={"content": "now"})),
            _refused(client.post(f"/v1/sessions/{ids[2]}/messages",
                                 json={"content": "now", "stream": True})),
            _refused(client.post("/v1/chat/completions", json={
                "model": "mibyan", "messages": [{"role": "user", "content": "hi"}]})),
            _refused(client.post("/v1/chat/completions", json={
                "model": "mibyan", "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}))]
        # Each one refused is told to come back later than the one before.
        assert waits == sorted(waits) and waits[0] < waits[-1]
        # A refused stateless completion made no session (it was refused before any route).
        assert sorted((gateway.home / "sessions").glob("*.jsonl")) == logs
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


def test_the_openai_sdk_comes_back_after_the_wait_it_is_told(tmp_path):
    gated = _gated(tmp_path, max_busy=1, max_retry_after=1.5)
    gateway, upstream = next(gated)
    refusals: list[float] = []

    def seen(response: httpx2.Response) -> None:
        if response.status_code == 503:
            refusals.append(time.monotonic())
            upstream.gate.set()  # the running turn ends now: the retry finds room

    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        running = threading.Thread(target=lambda: client.post(
            f"/v1/sessions/{sid}/messages", json={"content": "slow"}))
        running.start()
        _arrived(upstream, 1)
        sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=TOKENS["alice"],
                            max_retries=2, http_client=openai.DefaultHttpxClient(
                                event_hooks={"response": [seen]}))
        answer = sdk.chat.completions.create(
            model="mibyan", messages=[{"role": "user", "content": "hi"}])
        answered = time.monotonic()
        running.join(30)
    assert answer.choices[0].message.content == "done"
    assert len(refusals) == 1 and gateway.pool.admission.refused == 1
    # The first wait of the gateway's own (one turn's share: 2 s before any turn ended)
    # capped at max_retry_after, where the SDK's own backoff would have waited under 0.5 s.
    assert answered - refusals[0] >= 1.5
    gated.close()


def test_max_busy_is_read_from_serve_and_checked():
    env = {"T": "tok-0123456789"}
    tokens = {"tokens": {"a": "T"}}
    default = serve_config({"serve": tokens}, env=env)
    assert default.max_busy == default_max_busy() and default.max_retry_after == 60.0
    assert serve_config({"serve": {**tokens, "max_retry_after": 5}},
                        env=env).max_retry_after == 5.0
    with pytest.raises(UsageError, match="max_retry_after must be more than 0"):
        serve_config({"serve": {**tokens, "max_retry_after": 0}}, env=env)
    assert serve_config({"serve": {**tokens, "max_busy": 8}}, env=env).max_busy == 8
    with pytest.raises(UsageError, match="max_busy must be at least 1"):
        serve_config({"serve": {**tokens, "max_busy": 0}}, env=env)
    with pytest.raises(UsageError, match="max_busy must be a whole number"):
        serve_config({"serve": {**tokens, "max_busy": "8"}}, env=env)


@pytest.mark.parametrize("authorization", [None, "Bearer tok-wrong-0123456789", "Basic x"])
def test_a_full_gateway_tells_an_unauthenticated_client_401_not_its_load(gated, authorization):
    """Auth is checked before admission: a client without a valid token learns that, and not
    whether the gateway is full; one with a valid token is refused 503 as before."""
    gateway, upstream = gated
    with gateway.client() as client:
        ids = [client.post("/v1/sessions").json()["id"] for _ in range(3)]
        running = [threading.Thread(target=lambda sid=sid: client.post(
            f"/v1/sessions/{sid}/messages", json={"content": "slow"})) for sid in ids[:2]]
        for thread in running:
            thread.start()
        _arrived(upstream, 2)
        refused = gateway.pool.admission.refused
        with gateway.client(owner=None) as stranger:
            if authorization is not None:
                stranger.headers["Authorization"] = authorization
            for path, body in [(f"/v1/sessions/{ids[2]}/messages", {"content": "now"}),
                               ("/v1/chat/completions", {"model": "mibyan", "messages": [
                                   {"role": "user", "content": "hi"}]})]:
                answer = stranger.post(path, json=body)
                assert answer.status_code == 401, answer.text
                assert answer.json()["error"]["code"] == "invalid_api_key"
                assert "retry-after" not in answer.headers
                assert "retry-after-ms" not in answer.headers
                assert "busy" not in answer.text
        assert gateway.pool.admission.refused == refused  # no return slot given away
        _refused(client.post("/v1/chat/completions", json={
            "model": "mibyan", "messages": [{"role": "user", "content": "hi"}]}))
        assert gateway.pool.admission.refused == refused + 1
        upstream.gate.set()
        for thread in running:
            thread.join(30)
