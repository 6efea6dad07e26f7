"""``/v1/chat/completions`` and ``/v1/models`` driven by the OpenAI SDK and by plain httpx,
against a gateway on loopback whose upstream is the fake OpenAI server."""

from __future__ import annotations

import json

import openai
import pytest

from stages.log.events import ToolRan, TurnFinished
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import TOKENS


def sdk(gateway, owner: str = "alice") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=TOKENS[owner], max_retries=0)


def test_a_completion_answers_in_openai_s_shape_and_names_its_session(gateway):
    gateway.upstream.script(Reply.text("Hello from the agent."))
    raw = sdk(gateway).chat.completions.with_raw_response.create(
        model="mibyan", messages=[{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "hi"}])
    completion = raw.parse()
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "Hello from the agent."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == (completion.usage.prompt_tokens
                                             + completion.usage.completion_tokens) > 0
    session = raw.headers["x-mibyan-session-id"]
    sent = gateway.upstream.requests[0]["messages"]
    assert sent[0]["role"] == "system" and "Be brief." in sent[0]["content"]
    assert "through an API" in sent[0]["content"]  # the api platform's hint
    assert gateway.events(session)[0].settings.platform == "api"
    assert gateway.assert_every_session_replays() == 1


def test_a_streamed_completion_sends_chunks_then_usage_then_done(gateway):
    gateway.upstream.script(Reply.text("streamed answer here"))
    stream = sdk(gateway).chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed answer here"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])
    gateway.assert_every_session_replays()


def test_the_raw_stream_ends_with_done(gateway):
    gateway.upstream.script(Reply.text("ok"))
    with gateway.client() as client, client.stream(
            "POST", "/v1/chat/completions",
            json={"model": "mibyan", "stream": True,
                  "messages": [{"role": "user", "content": "hi"}]}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    bodies = [json.loads(line[6:]) for line in lines[:-1]]
    assert bodies[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None,
                                        "finish_reason": "stop"}
    assert "usage" not in bodies[0]


def test_a_tool_using_turn_runs_the_agent_s_tools(gateway, tmp_path):
    (tmp_path / "work" / "notes.txt").write_text("the answer is 42\n")
    gateway.upstream.script(Reply.tool_calls([("read_file", '{"path": "notes.txt"}')],
                                              ids=["call_notes"]),
                            Reply.text("It says 42."))
    raw = sdk(gateway).chat.completions.with_raw_response.create(
        model="mibyan", messages=[{"role": "user", "content": "what do the notes say?"}])
    assert raw.parse().choices[0].message.content == "It says 42."
    ran = [e for e in gateway.events(raw.headers["x-mibyan-session-id"])
           if isinstance(e, ToolRan)]
    assert [r.outcome.name for r in ran] == ["read_file"] and ran[0].outcome.ok
    assert "the answer is 42" in gateway.upstream.requests[1]["messages"][-1]["content"]
    gateway.assert_every_session_replays()


def test_the_caller_s_history_is_the_new_session_s_history(gateway):
    gateway.upstream.script(Reply.text("You said blue."))
    sdk(gateway).chat.completions.create(model="mibyan", messages=[
        {"role": "user", "content": "my colour is blue"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": [{"type": "text", "text": "what "}, {"type": "text",
                                                                          "text": "is it?"}]}])
    sent = [m for m in gateway.upstream.requests[0]["messages"] if m["role"] != "system"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "my colour is blue"), ("assistant", "Noted."), ("user", "what is it?")]
    gateway.assert_every_session_replays()


def test_the_session_header_continues_a_session(gateway):
    gateway.upstream.script(Reply.text("first"), Reply.text("second"))
    client = sdk(gateway)
    raw = client.chat.completions.with_raw_response.create(
        model="mibyan", messages=[{"role": "user", "content": "one"}])
    session = raw.headers["x-mibyan-session-id"]
    again = client.chat.completions.create(
        model="mibyan", messages=[{"role": "user", "content": "two"}],
        extra_headers={"X-Mibyan-Session-Id": session})
    assert again.choices[0].message.content == "second"
    sent = [m["content"] for m in gateway.upstream.requests[1]["messages"]
            if m["role"] != "system"]
    assert sent == ["one", "first", "two"]
    assert sum(isinstance(e, TurnFinished) for e in gateway.events(session)) == 2


def test_models_lists_the_agent_and_its_model(gateway):
    models = sdk(gateway).models.list()
    assert [m.id for m in models.data] == ["mibyan", "fake-model"]
    assert all(m.object == "model" and m.owned_by == "mibyan" for m in models.data)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": f"Basic {TOKENS['alice']}"}])
def test_a_request_without_a_valid_token_is_refused(gateway, headers):
    with gateway.client(owner=None) as client:
        for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"),
                             ("GET", "/v1/sessions")):
            response = client.request(method, path, headers=headers, json={})
            assert response.status_code == 401
            error = response.json()["error"]
            assert error["code"] == "invalid_api_key" and error["type"] == \
                "invalid_request_error" and set(error) == {"message", "type", "param", "code"}


def test_the_sdk_raises_its_authentication_error(gateway):
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


BAD = [
    ({"messages": [{"role": "user", "content": "x"}]}, 400, "model", None),
    ({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}, 404, "model",
     "model_not_found"),
    ({"model": "mibyan"}, 400, "messages", None),
    ({"model": "mibyan", "messages": []}, 400, "messages", None),
    ({"model": "mibyan", "messages": [{"role": "user", "content": "x"},
                                      {"role": "assistant", "content": "y"}]},
     400, "messages[1].role", None),
    ({"model": "mibyan", "messages": [{"role": "wizard", "content": "x"}]}, 400,
     "messages[0].role", None),
    ({"model": "mibyan", "messages": [{"role": "user", "content": 7}]}, 400,
     "messages[0].content", None),
    ({"model": "mibyan", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
     400, "messages[0].content[0]", None),
    ({"model": "mibyan", "messages": [{"role": "tool", "content": "r"},
                                      {"role": "user", "content": "x"}]}, 400,
     "messages[0].tool_call_id", None),
    ({"model": "mibyan", "messages": [{"role": "assistant", "tool_calls": "bad"},
                                      {"role": "user", "content": "x"}]}, 400,
     "messages[0].tool_calls", None),
    ({"model": "mibyan", "messages": [  # providers refuse a call without its result
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "x"}]}, 400, "messages[1].tool_calls", None),
    ({"model": "mibyan", "n": 2, "messages": [{"role": "user", "content": "x"}]}, 400, "n",
     None),
    ({"model": "mibyan", "stream": "yes", "messages": [{"role": "user", "content": "x"}]}, 400,
     "stream", None),
    ({"model": "mibyan", "stream_options": {"include_usage": True},
      "messages": [{"role": "user", "content": "x"}]}, 400, "stream_options", None),
    # Client tools are function tools (rules 8); the others and the old 'functions' are refused.
    ({"model": "mibyan", "tools": [{"type": "file_search"}],
      "messages": [{"role": "user", "content": "x"}]}, 400, "tools[0].type", None),
    ({"model": "mibyan", "tools": [{"type": "function", "function": {"description": "x"}}],
      "messages": [{"role": "user", "content": "x"}]}, 400, "tools[0].function.name", None),
    ({"model": "mibyan", "functions": [{"name": "f"}],
      "messages": [{"role": "user", "content": "x"}]}, 400, "functions", None),
    ({"model": "mibyan", "messages": [  # results of calls no session of alice's waits for
        {"role": "tool", "tool_call_id": "c7", "content": "r"}]}, 400, "messages", None),
    ([1, 2], 400, None, None),
]


@pytest.mark.parametrize(("body", "status", "param", "code"), BAD)
def test_a_bad_request_gets_a_clear_error_in_openai_s_shape(gateway, body, status, param, code):
    with gateway.client() as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (param, code)
    assert error["message"] and error["type"] == "invalid_request_error"
    assert gateway.upstream.requests == [] and gateway.pool.owned("alice") == []


def test_a_body_that_is_not_json_and_an_unknown_route_get_openai_errors(gateway):
    with gateway.client() as client:
        bad = client.post("/v1/chat/completions", content=b"{not json",
                          headers={"content-type": "application/json"})
        missing = client.get("/v1/nowhere")
        wrong_method = client.get("/v1/chat/completions")
    assert bad.status_code == 400 and "parse the JSON" in bad.json()["error"]["message"]
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["message"]
    assert wrong_method.headers["allow"] == "POST"  # what may be used instead


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("PUT", "/v1/sessions", "GET, HEAD, POST"),
    ("POST", "/v1/sessions/some-id", "DELETE, GET, HEAD"),
    ("GET", "/v1/sessions/some-id/messages", "POST"),
    ("DELETE", "/v1/models", "GET, HEAD")])
def test_a_405_names_every_method_its_path_accepts(gateway, method, path, allowed):
    with gateway.client() as client:
        response = client.request(method, path)
    assert response.status_code == 405 and response.headers["allow"] == allowed
    assert response.json()["error"]["message"]


def test_the_sdk_raises_its_errors_for_refused_requests(gateway):
    with pytest.raises(openai.NotFoundError, match="model_not_found|does not exist"):
        sdk(gateway).chat.completions.create(model="gpt-9",
                                             messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError):
        sdk(gateway).chat.completions.create(model="mibyan",
                                             messages=[{"role": "assistant", "content": "x"}])


@pytest.fixture
def small_bodies(upstream, tmp_path):
    """A gateway that takes bodies of at most 1,000 bytes."""
    from tests.pipeline.serve.conftest import start_gateway
    workdir = tmp_path / "work"
    workdir.mkdir()
    yield from start_gateway(upstream, tmp_path / "home", workdir,
                             serve={"max_body_bytes": 1000})


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_past_the_limit_is_a_413_before_it_is_read_whole(small_bodies, chunked):
    gateway = small_bodies
    body = json.dumps({"model": "mibyan",
                       "messages": [{"role": "user", "content": "x" * 5000}]}).encode()
    content = iter([body[:600], body[600:]]) if chunked else body  # no content-length
    with gateway.client() as client:
        response = client.post("/v1/chat/completions", content=content,
                               headers={"content-type": "application/json"})
        session = client.post("/v1/sessions", content=iter([b"{", b" " * 2000, b"}"]),
                              headers={"content-type": "application/json"})
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("request_too_large", "invalid_request_error")
    assert session.status_code == 413
    assert gateway.upstream.requests == [] and gateway.pool.owned("alice") == []


def _upstream_said(gateway) -> str:
    """What a failed upstream call's error names that a client must not see: the upstream's
    address (an internal host) and its own words."""
    gateway.upstream.script(Reply.error(400, "no access for key of project internal-x",
                                        code="bad_project"))
    return gateway.upstream.base_url.split("//")[1].split("/")[0]


def test_a_failed_turn_s_502_says_what_failed_but_not_where(gateway, caplog):
    host = _upstream_said(gateway)
    with gateway.client() as client:
        response = client.post("/v1/chat/completions", json={
            "model": "mibyan", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("api_error", "upstream_failed")
    assert "ProviderHTTPError" in error["message"] and "HTTP 400" in error["message"]
    assert host not in response.text and "internal-x" not in response.text
    # The server's own log keeps the whole error.
    assert any(host in r.getMessage() and "internal-x" in r.getMessage() for r in caplog.records)


def test_a_failed_streamed_turn_ends_in_an_error_event_that_names_no_address(gateway):
    host = _upstream_said(gateway)
    with gateway.client() as client, client.stream("POST", "/v1/chat/completions", json={
            "model": "mibyan", "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    error = json.loads(lines[-2][6:])["error"]
    assert (error["type"], error["code"]) == ("api_error", "upstream_failed")
    assert "ProviderHTTPError" in error["message"] and "HTTP 400" in error["message"]
    assert not any(host in line or "internal-x" in line for line in lines)
