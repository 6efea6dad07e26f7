"""The gateway refuses a session whose log holds a forged record, naming its seq (issue 24):
a session taken up again from its log after a restart is read through the same checks as
``replay`` and ``run --resume``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from effects.eventlog.store import session_path
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import ArrivalServer, start_gateway
from tests.pipeline.test_signed_logs import POSITIONS, forge

serving = contextlib.contextmanager(start_gateway)


@pytest.mark.parametrize("position", POSITIONS)
def test_the_gateway_refuses_a_forged_session_with_its_seq(upstream: ArrivalServer,
                                                            tmp_path: Path,
                                                            position: str) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    upstream.script(Reply.text("one"))
    with serving(upstream, home, work) as gateway, gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        assert client.post(f"/v1/sessions/{sid}/messages",
                           json={"content": "hi"}).json()["final_response"] == "one"
    seq = forge(session_path(home / "sessions", sid), POSITIONS[position])
    with serving(upstream, home, work) as gateway, gateway.client() as client:
        got = client.get(f"/v1/sessions/{sid}")
        sent = client.post(f"/v1/sessions/{sid}/messages", json={"content": "again"})
        for refused in (got, sent):
            assert refused.status_code == 500, refused.text
            message = refused.json()["error"]["message"]
            assert f"(seq {seq})" in message and "fails its signature" in message
    upstream.assert_done()


