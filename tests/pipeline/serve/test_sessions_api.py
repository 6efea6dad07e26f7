"""The session API: create, send (streamed or not), follow events, interrupt (by the API and
by a client leaving), 409 on a busy session, isolation between tokens, replay."""

from __future__ import annotations

import json
import threading

import pytest

from stages.log.events import ContextPressure, Interrupted, TurnFinished
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import TOKENS


def _events_of(stream_lines):
    """(event, data) pairs of an SSE stream's lines."""
    out, name = [], None
    for line in stream_lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            out.append((name, "[DONE]" if line == "data: [DONE]" else json.loads(line[6:])))
            name = None
    return out


def _wait_until(condition) -> None:
    """Until ``condition()`` (bounded: what is waited for is an event, not a time)."""
    for _ in range(3000):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("waited in vain")


def wait_idle(gateway, session_id: str) -> None:
    """Until the session's turn has ended."""
    _wait_until(lambda: not gateway.pool.get("alice", session_id).busy)


def test_create_send_get_list_delete(gateway):
    gateway.upstream.script(Reply.text("one"), Reply.text("two"))
    with gateway.client() as client:
        created = client.post("/v1/sessions")
        assert created.status_code == 201
        session = created.json()
        assert session["object"] == "session" and session["platform"] == "gateway"
        sid = session["id"]
        first = client.post(f"/v1/sessions/{sid}/messages", json={"content": "hello"}).json()
        assert first["final_response"] == "one" and first["completed"]
        second = client.post(f"/v1/sessions/{sid}/messages", json={"content": "again"}).json()
        assert second["final_response"] == "two"
        got = client.get(f"/v1/sessions/{sid}").json()
        assert got["turns"] == 2 and not got["busy"]
        assert [m["content"] for m in got["messages"]] == ["hello", "one", "again", "two"]
        listed = client.get("/v1/sessions").json()
        assert [s["id"] for s in listed["data"]] == [sid]
        assert client.delete(f"/v1/sessions/{sid}").json()["deleted"] is True
        assert client.get("/v1/sessions").json()["data"] == []
        # Deleted, it is answered as a session that never was (its log stays on disk).
        unknown = client.get("/v1/sessions/no-such-session").json()["error"]
        for method, path, body in (
                ("GET", f"/v1/sessions/{sid}", None),
                ("DELETE", f"/v1/sessions/{sid}", None),
                ("POST", f"/v1/sessions/{sid}/messages", {"content": "x"})):
            gone = client.request(method, path, json=body)
            assert gone.status_code == 404, (method, path)
            assert gone.json()["error"] == {**unknown, "message": f"No session {sid!r}."}
        chat = client.post("/v1/chat/completions", headers={"X-Mibyan-Session-Id": sid},
                           json={"model": "mibyan", "messages": [{"role": "user", "content": "x"}]})
        assert chat.status_code == 404
    sent = gateway.upstream.requests[0]["messages"][0]["content"]
    assert "messaging gateway" in sent  # the gateway platform's hint
    started = gateway.events(sid)[0].settings
    assert (started.platform, started.between_turns_threshold) == ("gateway", 0.85)
    gateway.assert_every_session_replays()


def test_a_streamed_message_sends_deltas_events_and_the_result(gateway):
    gateway.upstream.script(Reply.text("streamed reply"))
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        with client.stream("POST", f"/v1/sessions/{sid}/messages",
                           json={"content": "hi", "stream": True}) as response:
            items = _events_of(response.iter_lines())
    names = [name for name, _ in items]
    assert "".join(d["text"] for n, d in items if n == "delta") == "streamed reply"
    kinds = [d["kind"] for n, d in items if n == "event"]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_finished"
    assert names[-2] == "result" and items[-2][1]["final_response"] == "streamed reply"
    assert items[-1] == (None, "[DONE]")
    gateway.assert_every_session_replays()


def test_a_second_request_on_a_busy_session_gets_409(gateway):
    gateway.upstream.script(Reply.hang(30), Reply.text("after"))
    with gateway.client() as client, gateway.client() as other:
        sid = client.post("/v1/sessions").json()["id"]
        with client.stream("POST", f"/v1/sessions/{sid}/messages",
                           json={"content": "slow", "stream": True}) as response:
            assert gateway.upstream.arrived.wait(30)
            busy = other.post(f"/v1/sessions/{sid}/messages", json={"content": "me too"})
            assert busy.status_code == 409
            error = busy.json()["error"]
            assert (error["code"], error["type"]) == ("session_busy", "conflict_error")
            assert other.post(f"/v1/sessions/{sid}/replay").status_code == 409
            assert other.get(f"/v1/sessions/{sid}").json()["busy"] is True
            assert other.post(f"/v1/sessions/{sid}/interrupt").json() == {"interrupted": True}
            items = _events_of(response.iter_lines())
        result = next(d for n, d in items if n == "result")
        assert result["interrupted"] and not result["failed"]
        assert other.post(f"/v1/sessions/{sid}/interrupt").json() == {"interrupted": False}
        after = client.post(f"/v1/sessions/{sid}/messages", json={"content": "now?"}).json()
        assert after["final_response"] == "after" and after["completed"]
    gateway.assert_every_session_replays()


@pytest.mark.parametrize("route", ["chat", "session"])
def test_a_client_that_disconnects_mid_stream_interrupts_its_turn(gateway, route):
    gateway.upstream.script(Reply.hang(30), Reply.text("resumed"))
    with gateway.client() as client:
        if route == "chat":
            request = ("POST", "/v1/chat/completions",
                       {"model": "mibyan", "stream": True,
                        "messages": [{"role": "user", "content": "slow"}]})
        else:
            sid = client.post("/v1/sessions").json()["id"]
            request = ("POST", f"/v1/sessions/{sid}/messages", {"content": "slow",
                                                                "stream": True})
        with client.stream(request[0], request[1], json=request[2]) as response:
            sid = response.headers.get("x-mibyan-session-id") or sid
            assert gateway.upstream.arrived.wait(30)
        # The stream is closed: the gateway interrupts the turn, which ends cleanly.
        wait_idle(gateway, sid)
        events = gateway.events(sid)
        finished = [e for e in events if isinstance(e, TurnFinished)]
        assert finished[-1].interrupted and any(isinstance(e, Interrupted) for e in events)
        headers = {"X-Mibyan-Session-Id": sid}
        again = client.post("/v1/chat/completions", headers=headers, json={
            "model": "mibyan", "messages": [{"role": "user", "content": "still there?"}]})
        assert again.json()["choices"][0]["message"]["content"] == "resumed"
    gateway.assert_every_session_replays()


def test_one_token_sees_nothing_of_another_s_sessions(gateway):
    gateway.upstream.script(Reply.text("alice's answer"))
    with gateway.client("alice") as alice, gateway.client("bob") as bob:
        sid = alice.post("/v1/sessions").json()["id"]
        alice.post(f"/v1/sessions/{sid}/messages", json={"content": "secret plan"})
        assert bob.get("/v1/sessions").json()["data"] == []
        for method, path, body in (
                ("GET", f"/v1/sessions/{sid}", None),
                ("DELETE", f"/v1/sessions/{sid}", None),
                ("POST", f"/v1/sessions/{sid}/messages", {"content": "x"}),
                ("POST", f"/v1/sessions/{sid}/interrupt", None),
                ("POST", f"/v1/sessions/{sid}/replay", None),
                ("POST", f"/v1/sessions/{sid}/fork", {}),
                ("POST", f"/v1/sessions/{sid}/export", {}),
                ("GET", f"/v1/sessions/{sid}/events", None)):
            response = bob.request(method, path, json=body)
            assert response.status_code == 404, (method, path)
            assert response.json()["error"]["code"] == "session_not_found"
            assert "secret" not in response.text
        chat = bob.post("/v1/chat/completions", headers={"X-Mibyan-Session-Id": sid}, json={
            "model": "mibyan", "messages": [{"role": "user", "content": "x"}]})
        assert chat.status_code == 404
        unknown = alice.get("/v1/sessions/no-such-session")
        assert unknown.status_code == 404 and unknown.json() == bob.get(
            "/v1/sessions/no-such-session").json()
        assert alice.get(f"/v1/sessions/{sid}").json()["turns"] == 1


def test_the_events_stream_follows_another_request_s_turn(gateway):
    gateway.upstream.script(Reply.text("watched"))
    with gateway.client() as client, gateway.client() as watcher:
        sid = client.post("/v1/sessions").json()["id"]
        seen: list = []
        with watcher.stream("GET", f"/v1/sessions/{sid}/events") as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": keep-alive"  # subscribed: the turn may start
            done = threading.Thread(target=lambda: client.post(
                f"/v1/sessions/{sid}/messages", json={"content": "go"}))
            done.start()
            for line in lines:
                seen.append(line)
                if '"turn_finished"' in line:
                    break
            done.join()
    items = _events_of(seen)
    assert [d["kind"] for n, d in items if n == "event"][0] == "turn_started"
    assert "".join(d["text"] for n, d in items if n == "delta") == "watched"


def test_the_events_stream_ends_when_its_session_is_closed(gateway):
    """Else it would wait for ever on a session object the gateway no longer runs (its next
    turn runs in the session reopened from its log)."""
    with gateway.client() as client, gateway.client() as watcher:
        sid = client.post("/v1/sessions").json()["id"]
        with watcher.stream("GET", f"/v1/sessions/{sid}/events") as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": keep-alive"  # subscribed
            assert client.delete(f"/v1/sessions/{sid}").json()["deleted"] is True
            items = _events_of(lines)
    assert items == [("closed", {"type": "closed", "id": sid}), (None, "[DONE]")]


def test_replay_through_the_api(gateway):
    gateway.upstream.script(Reply.text("a"), Reply.text("b"))
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        for text in ("one", "two"):
            client.post(f"/v1/sessions/{sid}/messages", json={"content": text})
        report = client.post(f"/v1/sessions/{sid}/replay").json()
    assert report["identical"] is True and report["logs"][0]["session_id"] == sid
    assert report["logs"][0]["report"].startswith("identical (")


def test_fork_and_export_through_the_api(gateway):
    gateway.upstream.script(Reply.text("a"), Reply.text("b"), Reply.text("c"))
    with gateway.client() as client, gateway.client("bob") as bob:
        sid = client.post("/v1/sessions").json()["id"]
        for text in ("one", "two"):
            client.post(f"/v1/sessions/{sid}/messages", json={"content": text})
        second = next(e for e in gateway.events(sid)
                      if getattr(e, "user_message", None) == "two")
        at = gateway.events(sid).index(second)
        for body, param in (({"at": "x"}, "at"), ({"model": "other"}, "model"),
                            ({"base_url": "http://evil"}, "base_url"), ({"at": 10_000}, None)):
            refused = client.post(f"/v1/sessions/{sid}/fork", json=body)
            assert refused.status_code == 400, body
            assert refused.json()["error"]["param"] == param
        forked = client.post(f"/v1/sessions/{sid}/fork", json={"at": at})
        assert forked.status_code == 200, forked.text
        fork = forked.json()
        assert (fork["forked_from"], fork["origin_seq"], fork["answer"]) == (sid, at, None)
        # Not open yet: described from its log, which holds the origin's first turn.
        listed = {s["id"]: s for s in client.get("/v1/sessions").json()["data"]}
        assert (listed[fork["id"]]["open"], listed[fork["id"]]["turns"]) == (False, 1)
        assert listed[fork["id"]]["created"] >= listed[sid]["created"]
        got = client.get(f"/v1/sessions/{fork['id']}").json()
        assert [m["content"] for m in got["messages"]] == ["one", "a"]
        answer = client.post(f"/v1/sessions/{fork['id']}/messages", json={"content": "three"})
        assert answer.json()["final_response"] == "c"
        assert bob.post(f"/v1/sessions/{fork['id']}/export", json={}).status_code == 404
        exported = client.post(f"/v1/sessions/{fork['id']}/export", json={"format": "openai"})
        bad = client.post(f"/v1/sessions/{sid}/export", json={"format": "csv"})
    sent = gateway.upstream.requests[-1]
    assert [m["content"] for m in sent["messages"] if m["role"] == "user"] == ["one", "three"]
    samples = exported.json()["samples"]
    assert len(samples) == 1 and samples[0]["messages"][-1]["content"] == "c"
    assert bad.status_code == 400
    gateway.assert_every_session_replays()


@pytest.mark.parametrize(("body", "param"), [
    ({}, "content"), ({"content": ""}, "content"), ({"content": "x", "stream": 1}, "stream"),
    ({"content": "x", "system": 5}, "system")])
def test_a_bad_message_is_a_400_naming_the_field(gateway, body, param):
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        response = client.post(f"/v1/sessions/{sid}/messages", json=body)
    assert response.status_code == 400 and response.json()["error"]["param"] == param


def test_a_bad_platform_is_refused(gateway):
    with gateway.client() as client:
        response = client.post("/v1/sessions", json={"platform": "telegraph"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "platform"


@pytest.fixture
def small_window(upstream, tmp_path):
    from tests.pipeline.serve.conftest import start_gateway
    workdir = tmp_path / "work"
    workdir.mkdir()
    yield from start_gateway(upstream, tmp_path / "home", workdir, context_length=2048,
                             preflight_threshold=0.99, protect_last_n=2)


def test_a_gateway_session_compresses_between_turns_at_85_percent(small_window):
    gateway = small_window
    gateway.upstream.script(Reply.text("x" * 1600), Reply.text("a summary of it all"),
                            Reply.text("fine"))
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        client.post(f"/v1/sessions/{sid}/messages", json={"content": "write a lot"})
        result = client.post(f"/v1/sessions/{sid}/messages",
                             json={"content": "and now " + "y" * 2600}).json()
        got = client.get(f"/v1/sessions/{sid}").json()
    assert result["final_response"] == "fine"
    pressure = [e for e in gateway.events(sid) if isinstance(e, ContextPressure)]
    assert [p.reason for p in pressure] == ["between_turns"]
    assert pressure[0].threshold_tokens == int(2048 * 0.85)
    assert len(got["lineage"]) == 2  # the session went on in a child log
    assert gateway.assert_every_session_replays() == 2


def test_a_session_made_outside_the_api_is_adopted_by_its_owner(gateway):
    """What a fork route does with the child it makes."""
    agent = gateway.pool.factory(None, "gateway", lambda event: None)
    sid = agent.open()
    agent.close()
    gateway.pool.adopt("alice", sid)
    with gateway.client("alice") as alice, gateway.client("bob") as bob:
        assert alice.get(f"/v1/sessions/{sid}").json()["turns"] == 0
        assert bob.get(f"/v1/sessions/{sid}").status_code == 404
        assert sid in [s["id"] for s in alice.get("/v1/sessions").json()["data"]]


def test_a_client_that_leaves_a_plain_request_interrupts_its_turn(gateway):
    import socket
    from urllib.parse import urlsplit
    gateway.upstream.script(Reply.hang(30))
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
    address = urlsplit(gateway.url)
    body = json.dumps({"content": "slow"}).encode()
    with socket.create_connection((address.hostname, address.port)) as raw:
        raw.sendall(f"POST /v1/sessions/{sid}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {TOKENS['alice']}\r\n"
                    "Content-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert gateway.upstream.arrived.wait(30)
    wait_idle(gateway, sid)
    finished = [e for e in gateway.events(sid) if isinstance(e, TurnFinished)]
    assert finished[-1].interrupted
    gateway.assert_every_session_replays()


@pytest.mark.parametrize("stream", [False, True])
def test_a_failed_turn_s_result_says_what_failed_but_not_where(gateway, stream):
    gateway.upstream.script(Reply.error(400, "no access for key of project internal-x"))
    host = gateway.upstream.base_url.split("//")[1].split("/")[0]
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        with client.stream("POST", f"/v1/sessions/{sid}/messages",
                           json={"content": "hi", "stream": stream}) as response:
            text = response.read().decode()
    if stream:
        result = next(d for n, d in _events_of(text.splitlines()) if n == "result")
    else:
        result = json.loads(text)
    assert result["failed"] and "ProviderHTTPError" in result["error"]
    assert "HTTP 400" in result["error"]
    assert host not in result["error"] and "internal-x" not in result["error"]


@pytest.fixture
def one_worker(upstream, tmp_path):
    """A gateway whose turns all wait for one worker thread."""
    from tests.pipeline.serve.conftest import start_gateway
    workdir = tmp_path / "work"
    workdir.mkdir()
    yield from start_gateway(upstream, tmp_path / "home", workdir, workers=1)
    upstream.assert_done()  # the queued turn asked the upstream nothing


def _sent_raw(gateway, path: str, payload: dict, headers: str = ""):
    """A request sent on a bare socket (closing it is the client leaving)."""
    import socket
    from urllib.parse import urlsplit
    address = urlsplit(gateway.url)
    body = json.dumps(payload).encode()
    raw = socket.create_connection((address.hostname, address.port))
    raw.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {TOKENS['alice']}\r\n{headers}"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return raw


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("route", ["chat", "session"])
def test_a_client_that_leaves_before_its_turn_starts_means_it_never_runs(one_worker, route,
                                                                         stream):
    gateway = one_worker
    gateway.upstream.script(Reply.hang(30))
    with gateway.client() as client, gateway.client() as holder:
        first, queued = (client.post("/v1/sessions").json()["id"] for _ in range(2))
        with holder.stream("POST", f"/v1/sessions/{first}/messages",
                           json={"content": "slow", "stream": True}) as held:
            assert gateway.upstream.arrived.wait(30)  # the one worker is taken
            if route == "chat":
                raw = _sent_raw(gateway, "/v1/chat/completions", {
                    "model": "mibyan", "stream": stream,
                    "messages": [{"role": "user", "content": "queued"}]},
                    f"X-Mibyan-Session-Id: {queued}\r\n")
            else:
                raw = _sent_raw(gateway, f"/v1/sessions/{queued}/messages",
                                {"content": "queued", "stream": stream})
            with raw:
                _wait_until(lambda: gateway.pool.get("alice", queued).busy)  # it is queued
            # The turn that will never run gives its session back at once.
            wait_idle(gateway, queued)
            assert client.post(f"/v1/sessions/{first}/interrupt").json()["interrupted"]
            _events_of(held.iter_lines())
        wait_idle(gateway, first)
    assert not any(isinstance(e, TurnFinished) for e in gateway.events(queued))
    assert gateway.pool.get("alice", queued).turns == 0
    gateway.assert_every_session_replays()


def test_a_404_echoes_no_more_than_80_characters_of_what_it_was_sent(gateway):
    long = "s" * 5000
    with gateway.client() as client:
        by_path = client.get(f"/v1/sessions/{long}")
        by_header = client.post("/v1/chat/completions", headers={"X-Mibyan-Session-Id": long},
                                json={"model": "mibyan",
                                      "messages": [{"role": "user", "content": "x"}]})
        by_model = client.post("/v1/chat/completions", json={
            "model": long, "messages": [{"role": "user", "content": "x"}]})
    for response in (by_path, by_header, by_model):
        assert response.status_code == 404
        message = response.json()["error"]["message"]
        assert "s" * 80 + "\u2026" in message and "s" * 81 not in message


def test_a_streamed_message_sends_the_typed_run_events(gateway):
    """The same typed events as ``Agent.stream`` (``pipeline.run_events``), by their type."""
    (gateway.home.parent / "work" / "notes.txt").write_text("ten\n")
    gateway.upstream.script(
        Reply.tool_calls([("read_file", '{"path": "notes.txt"}')], ids=["call_r"]),
        Reply.text("It says ten."))
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        with client.stream("POST", f"/v1/sessions/{sid}/messages",
                           json={"content": "read it", "stream": True}) as response:
            items = _events_of(response.iter_lines())
    typed = {name: data for name, data in items
             if name in ("tool_started", "tool_finished", "turn_finished")}
    assert typed["tool_started"] == {"type": "tool_started", "call_id": "call_r",
                                     "name": "read_file", "arguments": '{"path":"notes.txt"}'}
    assert typed["tool_finished"]["ok"] and "ten" in typed["tool_finished"]["content"]
    assert typed["turn_finished"]["result"]["final_response"] == "It says ten."
    text = "".join(d["text"] for n, d in items if n == "text_delta")
    assert text == "It says ten."
    names = [name for name, _ in items]
    assert names.index("tool_started") < names.index("tool_finished") < names.index("result")


def test_a_session_s_result_writes_out_only_its_new_messages(gateway, monkeypatch):
    from pipeline import result as result_module
    written: list[str] = []
    real = result_module._returned

    def counting(message):  # type: ignore[no-untyped-def]
        written.append(message.text)
        return real(message)

    monkeypatch.setattr(result_module, "_returned", counting)
    gateway.upstream.script(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    with gateway.client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        for content in ("a", "b"):
            client.post(f"/v1/sessions/{sid}/messages", json={"content": content})
        written.clear()
        third = client.post(f"/v1/sessions/{sid}/messages", json={"content": "c"}).json()
    assert [m["content"] for m in third["messages"]] == ["a", "one", "b", "two", "c", "three"]
    assert written == ["c", "three"]
