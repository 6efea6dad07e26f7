"""Approvals that pause, over the gateway (``[serve] approvals = "pause"``): a session's
pending calls are listed, decided by a token allowed to, and the turn goes on; a message is
steered into a running turn."""

from __future__ import annotations

import threading

from stages.log import events as ev
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import start_gateway

PAUSE = {"approvals": "pause", "approvers": ["alice", "bob"]}


def _gateway(upstream, tmp_path, serve=PAUSE):
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "build").mkdir(parents=True)
    return start_gateway(upstream, home, work, serve=serve, toolsets=("terminal",)), work


def test_pending_calls_are_listed_and_decided_and_the_turn_goes_on(upstream, tmp_path) -> None:
    upstream.script(Reply.tool_calls([("terminal", '{"command": "rm -rf build"}')]),
                    Reply.text("Kept the build."))
    gateways, work = _gateway(upstream, tmp_path)
    for gateway in gateways:
        with gateway.client() as client:
            sid = client.post("/v1/sessions", json={}).json()["id"]
            paused = client.post(f"/v1/sessions/{sid}/messages", json={"content": "clean up"})
            assert paused.status_code == 200, paused.text
            body = paused.json()
            assert body["turn_exit_reason"] == "awaiting_approval"
            [call] = body["pending_approvals"]
            listed = client.get(f"/v1/sessions/{sid}/approvals").json()["data"]
            assert listed == [{"call_id": call["call_id"], "tool": "terminal",
                               "command": "rm -rf build", "pattern": "recursive_delete",
                               "description": call["description"]}]
            refused = client.post(f"/v1/sessions/{sid}/messages", json={"content": "other"})
            assert refused.status_code == 400 and "waits for approvals" in refused.text
            bad = client.post(f"/v1/sessions/{sid}/approvals",
                              json={"decisions": {call["call_id"]: "maybe"}})
            assert bad.status_code == 400
            done = client.post(f"/v1/sessions/{sid}/approvals", json={"decisions": {
                call["call_id"]: {"choice": "deny", "reason": "the build is needed"}}})
            assert done.status_code == 200, done.text
            assert done.json()["final_response"] == "Kept the build."
            assert client.get(f"/v1/sessions/{sid}/approvals").json()["data"] == []
        with gateway.client("bob") as other:  # another owner does not see the session
            assert other.get(f"/v1/sessions/{sid}/approvals").status_code == 404
        log = gateway.events(sid)
        assert any(isinstance(e, ev.ApprovalsDecided) for e in log)
        assert gateway.assert_every_session_replays() == 1
    assert (work / "build").is_dir()
    results = [m for m in upstream.requests[1]["messages"] if m["role"] == "tool"]
    assert "the user's reason: the build is needed" in results[0]["content"]


def test_a_token_that_is_no_approver_is_refused(upstream, tmp_path) -> None:
    upstream.script(Reply.tool_calls([("terminal", '{"command": "rm -rf build"}')]))
    gateways, _ = _gateway(upstream, tmp_path, serve={"approvals": "pause",
                                                      "approvers": ["bob"]})
    for gateway in gateways:
        with gateway.client() as client:
            sid = client.post("/v1/sessions", json={}).json()["id"]
            [call] = client.post(f"/v1/sessions/{sid}/messages",
                                 json={"content": "clean up"}).json()["pending_approvals"]
            refused = client.post(f"/v1/sessions/{sid}/approvals",
                                  json={"decisions": {call["call_id"]: "once"}})
            assert refused.status_code == 403
            assert client.get(f"/v1/sessions/{sid}/approvals").json()["data"] != []


def test_a_message_is_steered_into_the_running_turn(upstream, tmp_path) -> None:
    # The first call is answered a while after it arrived: the steer comes meanwhile.
    upstream.script(Reply.tool_calls([("terminal", '{"command": "echo hi"}')], delay=0.5),
                    Reply.text("Done, and short."))
    gateways, _ = _gateway(upstream, tmp_path, serve=None)
    for gateway in gateways:
        with gateway.client() as client:
            sid = client.post("/v1/sessions", json={}).json()["id"]
            assert client.post(f"/v1/sessions/{sid}/steer",
                               json={"content": "x"}).status_code == 409  # nothing runs
            answer: list = []
            worker = threading.Thread(target=lambda c=client, s=sid, a=answer: a.append(
                c.post(f"/v1/sessions/{s}/messages", json={"content": "say hi"})))
            worker.start()
            upstream.arrived.wait(10)
            steered = client.post(f"/v1/sessions/{sid}/steer",
                                  json={"content": "and keep it short"})
            worker.join(20)
            assert steered.json() == {"steered": True}
            assert answer[0].json()["final_response"] == "Done, and short."
        assert gateway.assert_every_session_replays() == 1
    assert upstream.requests[1]["messages"][-1] == {"role": "user",
                                                   "content": "and keep it short"}
