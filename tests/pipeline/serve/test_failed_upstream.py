"""A failed model call, as a gateway client sees it: its class and the provider's HTTP status,
never the provider's address or what it answered, in every answer and event stream, and in the
history of a session reopened from its log after a restart (whose notes hold the whole text)."""

from __future__ import annotations

import contextlib
import json
import socket
from types import SimpleNamespace

import pytest

from effects.eventlog.store import session_path
from pipeline.serve import shown as show
from pipeline.shell.journal import encode
from stages.log.events import (
    ContextInherited,
    HistoryLoaded,
    ModelFailed,
    SummaryFailed,
    TurnAborted,
    TurnFinished,
)
from stages.log.messages import Message
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.serve.conftest import start_gateway
from tests.pipeline.serve.test_sessions_api import _events_of

SHOWN_NOTE = "[no reply: the model call failed: the server's log has the details]"
serving = contextlib.contextmanager(start_gateway)
CALLS = 5  # the failed turns of the scenario: one model call each (no retries)


def _nobody_listens() -> str:
    """The address of a loopback port that refuses connections."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _streamed(client, path: str, body: dict, headers: dict | None = None) -> str:
    with client.stream("POST", path, json=body, headers=headers) as response:
        return response.read().decode()


def _first_gateway(gateway, received: list[str]) -> str:
    """A session whose two turns fail (streamed, then not): its id."""
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        streamed = _streamed(client, f"/v1/sessions/{sid}/messages",
                             {"content": "one", "stream": True})
        items = _events_of(streamed.splitlines())
        plain = client.post(f"/v1/sessions/{sid}/messages", json={"content": "two"})
        got = client.get(f"/v1/sessions/{sid}")
    received += [streamed, plain.text, got.text]
    failed = next(d["event"] for n, d in items if n == "event" and d["kind"] == "model_failed")
    assert failed["message"].startswith("the model call failed (") and failed["body"] is None
    finished = next(d["event"] for n, d in items if n == "event"
                    and d["kind"] == "turn_finished")
    assert finished["note"] == SHOWN_NOTE and finished["error"] == failed["message"]
    assert [m["content"] for m in got.json()["messages"]] == ["one", SHOWN_NOTE,
                                                             "two", SHOWN_NOTE]
    return sid


def _after_restart(gateway, sid: str, received: list[str]) -> None:
    """The session reopened from its log: its old notes hold the whole text."""
    chat = {"model": "mibyan", "messages": [{"role": "user", "content": "four"}]}
    headers = {"X-Mibyan-Session-Id": sid}
    with gateway.client() as client:
        plain = client.post(f"/v1/sessions/{sid}/messages", json={"content": "three"})
        completion = client.post("/v1/chat/completions", json=chat, headers=headers)
        streamed = _streamed(client, "/v1/chat/completions", {**chat, "stream": True},
                             headers)
        got = client.get(f"/v1/sessions/{sid}")
    received += [plain.text, completion.text, streamed, got.text]
    assert completion.status_code == 502
    assert [m["content"] for m in plain.json()["messages"]] == [
        "one", SHOWN_NOTE, "two", SHOWN_NOTE, "three", SHOWN_NOTE]
    assert len(got.json()["messages"]) == 10


@pytest.mark.parametrize("upstream_fails", ["connection_refused", "http_500"])
def test_no_answer_or_event_names_a_failed_upstream_s_address(tmp_path, upstream_fails):
    workdir = tmp_path / "work"
    workdir.mkdir()
    received: list[str] = []
    with FakeOpenAIServer() as failing:
        failing.script(*[Reply.error(500, "db-7.internal is down")] * CALLS)
        upstream = (SimpleNamespace(base_url=_nobody_listens())
                    if upstream_fails == "connection_refused" else failing)
        host = upstream.base_url.split("//")[1].split("/")[0]
        with serving(upstream, tmp_path / "home", workdir, max_retries=0) as gateway:
            sid = _first_gateway(gateway, received)
        # Another gateway on the same home: it reopens the session from its log.
        with serving(upstream, tmp_path / "home", workdir, max_retries=0) as gateway:
            _after_restart(gateway, sid, received)
        if upstream is failing:
            failing.assert_done()
    log = session_path(tmp_path / "home" / "sessions", sid).read_text()
    assert host in log  # the log keeps the whole text (replay reads it back as it was)
    for text in received:
        assert host not in text and "db-7" not in text and "refused" not in text, text
    said = json.loads(received[1])["error"]
    assert said.startswith("the model call failed (Provider")
    assert gateway.assert_every_session_replays() == 1


URL = "http://10.0.0.5:8080/v1/chat/completions"
FAILURE = ModelFailed(error_type="ProviderHTTPError", message=f"HTTP 500 from openai at {URL}",
                      status=500, body='{"error": "db-7 at 10.0.0.5 is down"}')
NOTE = f"[no reply: the model call failed: HTTP 500 from openai at {URL}]"
HISTORY = (Message(role="user", content="hi"), Message(role="assistant", content=NOTE))


SAID = "the model call failed (ProviderHTTPError, HTTP 500)"


@pytest.mark.parametrize(("event", "said"), [
    (FAILURE, SAID),
    (TurnFinished(exit_reason="model_error(ProviderHTTPError)", final_response=None,
                  completed=False, failed=True, error=f"ProviderHTTPError: {FAILURE.message}",
                  note=NOTE), f'{SAID}; the server\'s log has the details", "note": "{SHOWN_NOTE}'),
    (SummaryFailed(error_type="ProviderUnavailableError", message=f"openai at {URL}: refused"),
     "the model call failed (ProviderUnavailableError);"),
    (TurnAborted(error=f"ProviderUnavailableError: openai at {URL}"),
     '"error": "ProviderUnavailableError"'),
    (HistoryLoaded(messages=HISTORY), SHOWN_NOTE),
    (ContextInherited(parent_session_id="parent", reason="compression", messages=HISTORY),
     SHOWN_NOTE)],
    ids=lambda e: getattr(e, "kind", ""))
def test_a_follower_gets_no_event_that_names_the_upstream(event, said):
    shown = json.dumps(encode(show.event(event, FAILURE)))
    assert "10.0.0.5" not in shown and said in shown


@pytest.mark.parametrize("event", [
    SummaryFailed(error_type="EmptySummary", message="the summariser returned no text"),
    TurnFinished(exit_reason="interrupted_by_user", final_response=None, completed=False,
                 interrupted=True, note="[no reply: interrupted by user]"),
    HistoryLoaded(messages=(Message(role="user", content=NOTE),))],
    ids=lambda e: e.kind)
def test_the_turn_machine_s_own_words_and_what_the_user_wrote_are_shown_as_they_are(event):
    assert show.event(event, FAILURE) == event
