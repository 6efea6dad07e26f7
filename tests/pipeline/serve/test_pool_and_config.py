"""The session pool (bounded open agents, owners that outlive the process) and the
``[serve]`` settings."""

from __future__ import annotations

import pytest

from pipeline.serve.gateway_config import serve_config
from stages.errors import UsageError
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.serve.conftest import start_gateway


def test_past_max_open_the_idle_sessions_close_and_reopen_from_their_logs(gateway):
    gateway.pool.max_open = 2
    gateway.upstream.script(*(Reply.text(f"answer {n}") for n in range(4)))
    with gateway.client() as client:
        ids = [client.post("/v1/sessions").json()["id"] for _ in range(3)]
        assert len(gateway.pool.owned("alice")) == 2  # the oldest idle one was closed
        for n, sid in enumerate(ids):
            reply = client.post(f"/v1/sessions/{sid}/messages", json={"content": f"q{n}"})
            assert reply.json()["final_response"] == f"answer {n}"
        again = client.post(f"/v1/sessions/{ids[0]}/messages", json={"content": "more"})
        assert again.json()["final_response"] == "answer 3"
        assert [m["content"] for m in client.get(f"/v1/sessions/{ids[0]}").json()["messages"]] \
            == ["q0", "answer 0", "more", "answer 3"]
    gateway.assert_every_session_replays()


def test_a_restarted_gateway_gives_each_owner_back_its_sessions(upstream, tmp_path):
    upstream.script(Reply.text("before"), Reply.text("after"))
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    first = start_gateway(upstream, home, work)
    gateway = next(first)
    with gateway.client() as client:
        sid = client.post("/v1/sessions", json={"platform": "api"}).json()["id"]
        client.post(f"/v1/sessions/{sid}/messages", json={"content": "hello"})
    first.close()
    second = start_gateway(upstream, home, work)
    gateway = next(second)
    with gateway.client("bob") as bob:
        assert bob.get(f"/v1/sessions/{sid}").status_code == 404
    with gateway.client() as client:
        reply = client.post(f"/v1/sessions/{sid}/messages", json={"content": "back?"}).json()
        assert reply["final_response"] == "after"
        assert client.get(f"/v1/sessions/{sid}").json()["platform"] == "api"
    second.close()
    upstream.assert_done()



def test_a_session_reopened_by_a_gateway_on_another_model_goes_on_with_its_own(upstream,
                                                                              tmp_path):
    """As ``mibyan run --resume``: a session taken up again keeps the model it recorded (the
    gateway's model is for new sessions), over the session API and chat completions alike."""
    upstream.script(Reply.text("before"), Reply.text("after"), Reply.text("again"),
                    Reply.text("new"))
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    first = start_gateway(upstream, home, work)
    with next(first).client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        client.post(f"/v1/sessions/{sid}/messages", json={"content": "hello"})
    first.close()
    second = start_gateway(upstream, home, work, model="new-model")
    gateway = next(second)
    with gateway.client() as client:
        assert client.get(f"/v1/sessions/{sid}").json()["model"] == "fake-model"
        reply = client.post(f"/v1/sessions/{sid}/messages", json={"content": "back?"}).json()
        assert reply["final_response"] == "after"
        assert client.get(f"/v1/sessions/{sid}").json()["model"] == "fake-model"
        chat = client.post("/v1/chat/completions", headers={"X-Mibyan-Session-Id": sid},
                           json={"model": "mibyan",
                                 "messages": [{"role": "user", "content": "still?"}]})
        assert chat.status_code == 200, chat.text
        new = client.post("/v1/sessions").json()["id"]
        client.post(f"/v1/sessions/{new}/messages", json={"content": "hi"})
        assert client.get(f"/v1/sessions/{new}").json()["model"] == "new-model"
    assert gateway.assert_every_session_replays() == 2
    second.close()
    assert [r["model"] for r in upstream.requests] == \
        ["fake-model", "fake-model", "fake-model", "new-model"]
    upstream.assert_done()


def test_a_request_naming_another_model_for_a_session_is_refused_not_rerouted(upstream,
                                                                             tmp_path):
    """Before: the request named the gateway's new model, the session answered on its own
    recorded one, and the response said it came from the named model. Now a 409 says which
    model the session runs on; its own name and ``mibyan`` go through."""
    upstream.script(Reply.text("before"), Reply.text("own"))
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    first = start_gateway(upstream, home, work)
    with next(first).client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        client.post(f"/v1/sessions/{sid}/messages", json={"content": "hello"})
    first.close()
    second = start_gateway(upstream, home, work, model="new-model")
    with next(second).client() as client:
        def ask(model: str):
            return client.post("/v1/chat/completions", headers={"X-Mibyan-Session-Id": sid},
                               json={"model": model,
                                     "messages": [{"role": "user", "content": "again"}]})
        refused = ask("new-model")
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert (error["code"], error["param"]) == ("session_model_mismatch", "model")
        assert "`fake-model`" in error["message"]
        own = ask("fake-model")
        assert own.status_code == 200 and own.json()["model"] == "fake-model", own.text
    second.close()
    assert [r["model"] for r in upstream.requests] == ["fake-model", "fake-model"]
    upstream.assert_done()

def test_a_session_reopened_by_a_gateway_on_another_endpoint_calls_its_own(upstream, tmp_path,
                                                                          monkeypatch):
    """A session recorded on another endpoint than the gateway's goes on there, with that
    endpoint's key from the environment (as ``mibyan run --resume``), not the gateway's."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-0123456789")
    upstream.script(Reply.text("before"), Reply.text("after"))
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    first = start_gateway(upstream, home, work)
    with next(first).client() as client:
        sid = client.post("/v1/sessions").json()["id"]
        client.post(f"/v1/sessions/{sid}/messages", json={"content": "hello"})
    first.close()
    with FakeOpenAIServer() as elsewhere:
        second = start_gateway(elsewhere, home, work, model="new-model")
        with next(second).client() as client:
            reply = client.post(f"/v1/sessions/{sid}/messages", json={"content": "back?"})
            assert reply.json()["final_response"] == "after"
        second.close()
        assert elsewhere.requests == []
    assert [r["model"] for r in upstream.requests] == ["fake-model", "fake-model"]
    assert [h["authorization"] for h in upstream.request_headers] == \
        ["Bearer sk-upstream-key-0123456789", "Bearer sk-env-key-0123456789"]
    upstream.assert_done()

def test_after_a_restart_a_session_describes_itself_from_its_logs_as_before(upstream,
                                                                           tmp_path):
    """Its start, turns, lineage (a compression continued it in a child log) and history, in
    the list (not open) and on its own (reopened); its next turn counts on from there."""
    upstream.script(Reply.text("x" * 1600), Reply.text("a summary of it all"),
                    Reply.text("fine"), Reply.text("after"))
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    # Room for one compression: rules 7 adds the data notice to the prompt (was 2048).
    small_window = {"context_length": 2400, "preflight_threshold": 0.99, "protect_last_n": 2}
    first = start_gateway(upstream, home, work, **small_window)
    with next(first).client() as client:
        sid = client.post("/v1/sessions", json={"platform": "api"}).json()["id"]
        for content in ("write a lot", "and now " + "y" * 2600):
            client.post(f"/v1/sessions/{sid}/messages", json={"content": content})
        before = client.get(f"/v1/sessions/{sid}").json()
        [listed_before] = client.get("/v1/sessions").json()["data"]
    first.close()
    assert before["turns"] == 2 and len(before["lineage"]) == 2
    second = start_gateway(upstream, home, work, **small_window)
    with next(second).client() as client:
        [listed] = client.get("/v1/sessions").json()["data"]
        assert listed == {**listed_before, "open": False}
        assert client.get(f"/v1/sessions/{sid}").json() == before
        client.post(f"/v1/sessions/{sid}/messages", json={"content": "back?"})
        after = client.get(f"/v1/sessions/{sid}").json()
    second.close()
    assert after["turns"] == 3
    assert (after["created"], after["lineage"]) == (before["created"], before["lineage"])
    assert [m["content"] for m in after["messages"]] == [
        *(m["content"] for m in before["messages"]), "back?", "after"]
    upstream.assert_done()


def test_a_deleted_session_stays_deleted_after_a_restart(upstream, tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    first = start_gateway(upstream, home, work)
    gateway = next(first)
    with gateway.client() as client:
        kept, deleted = (client.post("/v1/sessions").json()["id"] for _ in range(2))
        assert client.delete(f"/v1/sessions/{deleted}").status_code == 200
    first.close()
    second = start_gateway(upstream, home, work)
    gateway = next(second)
    with gateway.client() as client:
        assert [s["id"] for s in client.get("/v1/sessions").json()["data"]] == [kept]
        assert client.get(f"/v1/sessions/{deleted}").status_code == 404
        assert client.get(f"/v1/sessions/{kept}").status_code == 200
    second.close()


def test_the_pool_keeps_nothing_of_a_deleted_session_s_logs(gateway):
    """It kept each listed log's facts for good: a gateway making and deleting sessions for
    months would have grown by each of them."""
    with gateway.client() as client:
        kept, deleted = (client.post("/v1/sessions").json()["id"] for _ in range(2))
        client.get("/v1/sessions")  # listing reads (and keeps) what the logs tell
        assert kept in gateway.pool.logs and deleted in gateway.pool.logs
        assert client.delete(f"/v1/sessions/{deleted}").status_code == 200
    assert deleted not in gateway.pool.logs and kept in gateway.pool.logs


ENV = {"TA": "token-a", "TB": "token-b"}


def test_tokens_come_from_the_environment_variables_config_names():
    config = serve_config({"serve": {"tokens": {"alice": "TA", "bob": "TB"}, "port": 9000}},
                          env=ENV)
    assert dict(config.tokens) == {"token-a": "alice", "token-b": "bob"}
    assert (config.port, config.host, config.auth) == (9000, "127.0.0.1", True)
    assert "token-a" not in repr(config)
    assert serve_config({}, no_auth=True, port=0).tokens == {}


def test_the_guard_s_settings_come_from_serve():
    config = serve_config({"serve": {
        "tokens": {"alice": "TA"}, "allowed_hosts": ["agent.lan"],
        "cors_origins": ["https://chat.example.com/"], "max_body_bytes": 1000,
        "max_json_depth": 8, "header_timeout": 2, "body_timeout": 2.5,
        "trust_terminal_approvals": True}}, env=ENV)
    assert (config.allowed_hosts, config.cors_origins) == (
        ("agent.lan",), ("https://chat.example.com",))
    assert (config.max_body_bytes, config.max_json_depth) == (1000, 8)
    assert (config.header_timeout, config.body_timeout) == (2.0, 2.5)
    assert config.trust_terminal_approvals
    default = serve_config({}, no_auth=True)
    assert (default.allowed_hosts, default.cors_origins) == ((), ())
    assert not default.trust_terminal_approvals


@pytest.mark.parametrize(("file", "match"), [
    ({}, "no bearer tokens"),
    ({"serve": {"tokens": {"alice": "UNSET"}}}, r"\$UNSET is not set"),
    ({"serve": {"tokens": {"alice": "TA", "eve": "TA"}}}, "same token"),
    ({"serve": {"tokens": {"alice": 3}}}, "must name an environment variable"),
    ({"serve": {"tokens": {"alice": "TA"}, "port": "80"}}, r"\[serve\] port must be a whole number"),
    ({"serve": {"tokens": {"alice": "TA"}, "colour": "red"}}, r"unknown setting \[serve\]"),
    ({"serve": {"tokens": {"alice": "TA"}, "toolsets": ["magic"]}}, "unknown toolset"),
    ({"serve": {"tokens": {"alice": "TA"}, "max_open_sessions": 0}}, "at least 1"),
    ({"serve": "yes"}, "must be a table"),
    ({"serve": {"tokens": {"alice": "TA"}, "allowed_hosts": "a.lan"}}, "must be a list"),
    ({"serve": {"tokens": {"alice": "TA"}, "cors_origins": [""]}}, "a list of names"),
    ({"serve": {"tokens": {"alice": "TA"}, "header_timeout": 0}}, "more than 0"),
    ({"serve": {"tokens": {"alice": "TA"}, "body_timeout": "30"}}, "a number of seconds"),
    ({"serve": {"tokens": {"alice": "TA"}, "max_json_depth": True}}, "a whole number"),
    ({"serve": {"tokens": {"alice": "TA"}, "max_body_bytes": -1}}, "more than 0"),
])
def test_a_bad_serve_setting_is_a_usage_error_naming_it(file, match):
    with pytest.raises(UsageError, match=match):
        serve_config(file, env=ENV)


def test_a_new_session_is_not_closed_to_make_room_while_the_others_are_busy(gateway):
    gateway.pool.max_open = 1
    gateway.upstream.script(Reply.hang(30), Reply.text("the new one answers"))
    with gateway.client() as client, gateway.client() as other:
        sid = client.post("/v1/sessions").json()["id"]
        with client.stream("POST", f"/v1/sessions/{sid}/messages",
                           json={"content": "slow", "stream": True}):
            assert gateway.upstream.arrived.wait(30)
            answer = other.post("/v1/chat/completions", json={
                "model": "mibyan", "messages": [{"role": "user", "content": "hi"}]})
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == "the new one answers"
            other.post(f"/v1/sessions/{sid}/interrupt")
