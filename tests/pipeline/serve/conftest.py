"""A gateway on loopback (uvicorn in a thread, an ephemeral port) over the fake OpenAI server,
with two owners: alice and bob."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx2
import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.serve.agents import AgentMaker
from pipeline.serve.app import create_app
from pipeline.serve.gateway_config import serve_config
from pipeline.serve.pool import SessionPool
from pipeline.serve.server import BackgroundServer
from pipeline.shell.replay import replay
from tests.fake_openai import FakeOpenAIServer

TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-9876543210"}


class ArrivalServer(FakeOpenAIServer):
    """Tells when a request has arrived (so a test acts mid-call, not before)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.arrived = threading.Event()

    def _record(self, body, headers):
        try:
            return super()._record(body, headers)
        finally:
            self.arrived.set()


@attrs.define
class Gateway:
    url: str
    pool: SessionPool
    home: Path
    upstream: ArrivalServer

    def client(self, owner: str | None = "alice", **kwargs) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {TOKENS[owner]}"} if owner else {}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def events(self, log_id: str) -> list:
        path = session_path(self.home / "sessions", log_id)
        return [from_payload(e.kind, e.schema_version, e.payload) for e in read_envelopes(path)]

    def assert_every_session_replays(self) -> int:
        """Every log the gateway wrote replays identically; how many there were."""
        logs = sorted(p.stem for p in (self.home / "sessions").glob("*.jsonl"))
        for log_id in logs:
            report = replay(self.home / "sessions", log_id)
            assert report.identical, report.describe()
        return len(logs)


def start_gateway(upstream: FakeOpenAIServer, home: Path, workdir: Path, *,
                  workers: int | None = None,
                  model: str = "fake-model", serve: dict | None = None,
                  toolsets: tuple[str, ...] = ("files",), no_auth: bool = False,
                  **config) -> Iterator:
    """A gateway over ``upstream``; ``serve`` adds keys to its ``[serve]`` table."""
    settings = serve_config({"serve": {"tokens": {"alice": "TOKEN_A", "bob": "TOKEN_B"},
                                       **(serve or {})}},
                            env={"TOKEN_A": TOKENS["alice"], "TOKEN_B": TOKENS["bob"]},
                            workdir=workdir, no_auth=no_auth)
    maker = AgentMaker(workdir=workdir, toolsets=toolsets, home=home, model=model,
                       base_url=upstream.base_url, api_key="sk-upstream-key-0123456789",
                       durability="flush",
                       trust_terminal_approvals=settings.trust_terminal_approvals,
                       approvals=settings.approvals, **config)
    pool = SessionPool(maker, home=home, workers=workers, max_busy=settings.max_busy,
                       max_retry_after=settings.max_retry_after)
    app = create_app(pool, settings, models=("mibyan", maker.model))
    try:
        with BackgroundServer(app, head_timeout=settings.header_timeout) as server:
            yield Gateway(url=server.url, pool=pool, home=home, upstream=upstream)
    finally:
        pool.shutdown()


@pytest.fixture
def upstream() -> Iterator[ArrivalServer]:
    with ArrivalServer() as srv:
        yield srv


@pytest.fixture
def gateway(upstream, tmp_path) -> Iterator[Gateway]:
    workdir = tmp_path / "work"
    workdir.mkdir()
    yield from start_gateway(upstream, tmp_path / "home", workdir)
    upstream.assert_done()
