"""A server error tells the client an id to quote, never the server's paths or internals; the
server's log keeps the detail under that id."""

from __future__ import annotations

import logging
import re

import pytest

from effects.eventlog.store import session_path
from pipeline.serve.plumbing import failure
from stages.errors import LogConflictError, LogCorruptError


def _damage(gateway, sid: str) -> None:
    """Close the session, then change a byte inside its first record."""
    session = gateway.pool.find("alice", sid)
    with session.claimed():
        gateway.pool.close(session)
    path = session_path(gateway.home / "sessions", sid)
    text = path.read_text()
    at = text.index('"kind"') + 2
    path.write_text(text[:at] + ("X" if text[at] != "X" else "Y") + text[at + 1:])


@pytest.mark.parametrize("route", ["messages", "replay", "fork"])
def test_a_damaged_log_is_a_500_naming_the_session_not_a_path(gateway, caplog, route):
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        _damage(gateway, sid)
        with caplog.at_level(logging.ERROR):
            response = client.post(f"/v1/sessions/{sid}/{route}", json={"content": "hi"})
    assert response.status_code == 500, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("server_error", "session_log_unreadable")
    assert sid in error["message"]
    assert str(gateway.home) not in response.text and "/tmp" not in response.text
    assert "Error" not in error["message"]  # no exception class or text
    error_id = re.search(r"error ([0-9a-f]{12})", error["message"]).group(1)
    logged = [r.getMessage() for r in caplog.records if error_id in r.getMessage()]
    assert logged and "LogCorruptError" in logged[0]


@pytest.mark.parametrize("exc", [
    LogCorruptError("record 3 of /srv/home/sessions/abc.jsonl fails its hash"),
    LogConflictError("/srv/home/sessions/abc.jsonl is held by another writer"),
    RuntimeError("/srv/home/plugins/x.py exploded")])
def test_an_internal_error_s_body_holds_an_id_not_its_text(exc, caplog):
    with caplog.at_level(logging.ERROR):
        error = failure(exc)
    assert error.status == 500 and error.type == "server_error"
    assert "/srv" not in error.message and type(exc).__name__ not in error.message
    error_id = re.search(r"error ([0-9a-f]{12})", error.message).group(1)
    assert any(error_id in r.getMessage() and "/srv/home" in r.getMessage()
               for r in caplog.records)
