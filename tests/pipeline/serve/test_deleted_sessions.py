"""A deleted session leaves nothing behind in the gateway's process (issue 29: a soak of
sessions that come and go must keep a flat memory): not its agent, its history, or a trace in
the pool's registries."""

from __future__ import annotations

import gc
import threading
import weakref

from effects import workers
from tests.fake_openai import Reply


def _collected(ref: weakref.ref) -> bool:
    """Whether ``ref``'s object is gone, once the requests' last steps that may still hold
    it for a moment (a finished turn's thread letting go of its work) are done (bounded: what
    is waited for is an event, not a time)."""
    for _ in range(1000):
        gc.collect()
        if ref() is None:
            return True
        threading.Event().wait(0.01)
    return False


def _used_and_deleted(gateway, client, *, stream: bool) -> tuple[weakref.ref, weakref.ref]:
    """A session made, given two turns and deleted through the API; weak references to its
    ``ServedSession`` and its agent."""
    sid = client.post("/v1/sessions").json()["id"]
    session = gateway.pool.find("alice", sid)
    refs = weakref.ref(session), weakref.ref(session.agent)
    del session
    for text in ("first", "second"):
        sent = client.post(f"/v1/sessions/{sid}/messages",
                           json={"content": text, "stream": stream})
        assert sent.status_code == 200, sent.text
    assert client.delete(f"/v1/sessions/{sid}").status_code == 200
    return refs


def test_a_deleted_session_is_collected_and_forgotten(gateway, monkeypatch):
    # Idle model-call workers stay for the test's length, as they do in a busy gateway.
    monkeypatch.setattr(workers, "IDLE_SECONDS", 3600.0)
    gateway.upstream.script(*(Reply.text(f"answer {n}") for n in range(4)))
    with gateway.client() as client:
        refs = [_used_and_deleted(gateway, client, stream=stream) for stream in (False, True)]
    # The worker threads that ran the model calls are idle now, not gone: what they ran last
    # must not keep the session (its agent, its whole history) alive.
    assert [_collected(ref) for pair in refs for ref in pair] == [True] * 4
    pool = gateway.pool
    assert (pool.counts(), pool.owners.of("alice"), pool._waiting) == ((0, 0), [], {})
    assert not any(log_id in pool.logs for log_id in pool.logs._known)
