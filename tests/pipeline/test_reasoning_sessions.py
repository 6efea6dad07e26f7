"""Reasoning models end to end, through the public ``Agent`` against the fake servers of all
three APIs (streamed and not): tool loops of several calls whose reasoning goes back as each API
requires (the fakes refuse what the real APIs refuse), ``<think>`` in chat content, a fallback
from a thinking provider to a plain one, the recoveries, and replay of every session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from stages.errors import UsageError
from stages.fold import fold
from stages.recovery.reasoning import THINKING_EXHAUSTED_TEXT
from tests.fake_anthropic import FakeAnthropicServer, signature_of
from tests.fake_anthropic import Reply as AReply
from tests.fake_openai import Reply
from tests.fake_responses import FakeResponsesServer, ResponsesReply

KEY = "sk-test-reasoning-key-0000"
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@pytest.fixture
def anthropic():
    with FakeAnthropicServer() as srv:
        yield srv
        srv.assert_done()


@pytest.fixture
def responses():
    with FakeResponsesServer() as srv:
        yield srv
        srv.assert_done()


def agent(server: Any, home: Any, api_mode: str, **kw: Any) -> Agent:
    kw.setdefault("retry_base_delay", 0.001)
    kw.setdefault("context_length", 200_000)  # known: no window probe
    return Agent(model="fake-model", base_url=server.base_url, api_key=KEY, api_mode=api_mode,
                 provider=kw.pop("provider", "fake"), home=home, tools=[add], **kw)


def events(home: Any, sid: str) -> list:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", sid))]


def recoveries(home: Any, sid: str) -> list[tuple[str, str]]:
    return [(e.reason, e.action) for e in events(home, sid) if e.kind == "recovery_decided"]


def assert_replays(home: Any, sid: str) -> None:
    report = replay(home / "sessions", sid)
    assert report.identical, report.describe()


# --- Anthropic: signed thinking goes back on the tool loop ------------------------------------

@STREAM
def test_anthropic_tool_loop_sends_signed_thinking_back_unmodified(anthropic, tmp_path, stream):
    anthropic.script(
        AReply.tool_use([("add", '{"a": 2, "b": 3}')], thinking="I should add.", redacted=True),
        AReply.tool_use([("add", '{"a": 5, "b": 1}')], thinking="Now add one."),
        AReply.text("The sum is 6.", thinking="Done adding."))
    thoughts: list[str] = []
    with agent(anthropic, tmp_path, "anthropic_messages", stream=stream, reasoning="low") as a:
        result = a.run_conversation("Add 2 and 3, then add 1.", reasoning_callback=thoughts.append)
    assert result["completed"], result["error"]
    assert result["final_response"] == "The sum is 6."
    assert result["last_reasoning"] == "Done adding."
    assert anthropic.rejections == []
    bodies = anthropic.requests
    assert [b["thinking"] for b in bodies] == [{"type": "enabled", "budget_tokens": 4000}] * 3
    assert all(b["max_tokens"] > 4000 for b in bodies)
    first_turn = bodies[1]["messages"][1]["content"]
    assert first_turn[0] == {"type": "thinking", "thinking": "I should add.",
                             "signature": signature_of("I should add.")}
    assert first_turn[1]["type"] == "redacted_thinking"
    assert [b["type"] for b in bodies[2]["messages"][3]["content"]] == ["thinking", "tool_use"]
    if stream:
        assert "".join(thoughts) == "I should add.Now add one.Done adding."
    assert_replays(tmp_path, result["session_id"])


@STREAM
def test_a_compatible_endpoints_unsigned_thinking_goes_back_as_text(anthropic, tmp_path, stream):
    """An Anthropic-compatible endpoint that does not sign its thinking: before, the thinking
    was dropped from the next request, and the model lost what it built its call on."""
    anthropic.script(
        AReply.tool_use([("add", '{"a": 2, "b": 3}')], thinking="Add them first.", unsigned=True),
        AReply.text("The sum is 5."))
    with agent(anthropic, tmp_path, "anthropic_messages", stream=stream) as a:
        result = a.run_conversation("Add 2 and 3.")
    assert result["completed"], result["error"]
    turn = anthropic.requests[1]["messages"][1]["content"]
    assert turn[0] == {"type": "text", "text": "<thinking>\nAdd them first.\n</thinking>"}
    assert [b["type"] for b in turn] == ["text", "tool_use"]
    assert_replays(tmp_path, result["session_id"])

def test_insights_say_anthropic_reasoning_is_in_the_output_not_zero(anthropic, tmp_path,
                                                                     capsys) -> None:
    from pipeline.cli.main import main
    anthropic.script(AReply.text("Four.", thinking="Two and two."))
    with agent(anthropic, tmp_path, "anthropic_messages", reasoning="low") as a:
        assert a.run_conversation("2+2?")["completed"]
    assert main(["--home", str(tmp_path), "insights", "--json"]) == 0
    (model,) = json.loads(capsys.readouterr().out)["models"]
    assert (model["reasoning_tokens"], model["reasoning_in_output_calls"]) == (0, 1)
    assert main(["--home", str(tmp_path), "insights"]) == 0
    assert "in output (1 call)" in capsys.readouterr().out

def test_anthropic_refuses_a_tool_loop_whose_thinking_was_dropped(anthropic, tmp_path):
    """The fake refuses like the real API: thinking on, the last assistant turn without it."""
    body = {"model": "m", "max_tokens": 5000,
            "thinking": {"type": "enabled", "budget_tokens": 2000},
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "add", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "5"}]}]}
    import httpx2
    response = httpx2.post(anthropic.base_url + "/v1/messages", json=body,
                          headers={"x-api-key": "k", "anthropic-version": "2023-06-01"})
    assert response.status_code == 400 and "Expected `thinking`" in response.text
    altered = json.loads(json.dumps(body))
    altered["messages"][1]["content"].insert(0, {"type": "thinking", "thinking": "edited",
                                                 "signature": signature_of("original")})
    response = httpx2.post(anthropic.base_url + "/v1/messages", json=altered,
                          headers={"x-api-key": "k", "anthropic-version": "2023-06-01"})
    assert response.status_code == 400 and "Invalid `signature`" in response.text
    assert len(anthropic.rejections) == 2


def test_thinking_signature_error_resends_without_reasoning_once(anthropic, tmp_path):
    bad = AReply.error(400, "messages.1.content.0: Invalid `signature` in `thinking` block",
                       type="invalid_request_error")
    anthropic.script(AReply.tool_use([("add", '{"a": 2, "b": 3}')], thinking="Add them."),
                     bad, AReply.text("5."))
    with agent(anthropic, tmp_path, "anthropic_messages", stream=False,
               reasoning="low") as a:
        result = a.run_conversation("Add 2 and 3.")
    sid = result["session_id"]
    assert result["completed"] and result["final_response"] == "5."
    assert recoveries(tmp_path, sid) == [("thinking_signature", "strip_reasoning")]
    retried = anthropic.requests[2]
    assert "thinking" not in retried and "thinking" not in json.dumps(retried["messages"])
    # The stored history keeps the signed thinking.
    state = fold(events(tmp_path, sid))
    assert state.messages[1].reasoning_parts[0].signature == signature_of("Add them.")
    assert_replays(tmp_path, sid)


def test_a_second_signature_error_is_not_retried_again(anthropic, tmp_path):
    bad = AReply.error(400, "messages.1.content.0: Invalid `signature` in `thinking` block",
                       type="invalid_request_error")
    anthropic.script(AReply.tool_use([("add", '{"a": 2, "b": 3}')], thinking="Add them."),
                     bad, bad)
    with agent(anthropic, tmp_path, "anthropic_messages", stream=False, reasoning="low",
               max_retries=3) as a:
        result = a.run_conversation("Add 2 and 3.")
    assert result["failed"] and "signature" in result["error"]
    assert recoveries(tmp_path, result["session_id"]) == [
        ("thinking_signature", "strip_reasoning")]
    assert_replays(tmp_path, result["session_id"])


def test_budget_spent_on_thinking_alone_ends_with_a_clear_reason(anthropic, tmp_path):
    anthropic.script(AReply.text("", thinking="So much to consider...", stop_reason="max_tokens"))
    with agent(anthropic, tmp_path, "anthropic_messages", reasoning="low") as a:
        result = a.run_conversation("Think hard.")
    assert result["failed"] and not result["completed"]
    assert result["turn_exit_reason"] == "thinking_budget_exhausted"
    assert result["error"] == THINKING_EXHAUSTED_TEXT
    assert result["final_response"] is None
    assert result["last_reasoning"] == "So much to consider..."
    assert_replays(tmp_path, result["session_id"])


# --- Responses: encrypted reasoning items go back ---------------------------------------------

@STREAM
def test_responses_tool_loop_replays_encrypted_reasoning(responses, tmp_path, stream):
    responses.script(
        ResponsesReply.function_calls([("add", '{"a": 2, "b": 3}')], reasoning="plan: add",
                                      encrypted=True),
        ResponsesReply.function_calls([("add", '{"a": 5, "b": 1}')], reasoning="plan: one more",
                                      encrypted=True),
        ResponsesReply.text("The sum is 6.", reasoning="done", encrypted=True))
    thoughts: list[str] = []
    with agent(responses, tmp_path, "codex_responses", stream=stream, reasoning="medium") as a:
        result = a.run_conversation("Add 2 and 3, then add 1.",
                                    reasoning_callback=thoughts.append)
    assert result["completed"], result["error"]
    assert result["final_response"] == "The sum is 6." and result["last_reasoning"] == "done"
    assert responses.rejections == []
    bodies = responses.requests
    assert all(b["include"] == ["reasoning.encrypted_content"] for b in bodies)
    assert all(b["reasoning"] == {"effort": "medium", "summary": "auto"} for b in bodies)
    kinds = [item["type"] for item in bodies[2]["input"]]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output",
                     "reasoning", "function_call", "function_call_output"]
    replayed = [i for i in bodies[2]["input"] if i["type"] == "reasoning"]
    assert all("id" not in i and i["encrypted_content"].startswith("gAAAAB") for i in replayed)
    if stream:
        assert "".join(thoughts) == "plan: addplan: one moredone"
    assert_replays(tmp_path, result["session_id"])


def _rejected_replay() -> tuple[ResponsesReply, ...]:
    """A tool call with encrypted reasoning, the provider refusing it when it comes back, and
    the answer to the call once it is sent without it."""
    unreadable = ResponsesReply.error(
        400, "The encrypted content for item rs_1 could not be verified.",
        code="invalid_encrypted_content")
    return (ResponsesReply.function_calls([("add", '{"a": 2, "b": 3}')], reasoning="plan",
                                          encrypted=True),
            unreadable, ResponsesReply.text("5."))


def test_unreadable_encrypted_reasoning_stops_its_replay_for_the_session(responses, tmp_path):
    responses.script(*_rejected_replay(), ResponsesReply.text("Again 5."))
    with agent(responses, tmp_path, "codex_responses", stream=False, reasoning="low") as a:
        first = a.run_conversation("Add 2 and 3.")
        second = a.run_conversation("And again?")
    assert first["completed"] and second["completed"]
    assert recoveries(tmp_path, first["session_id"]) == [
        ("invalid_encrypted_content", "stop_reasoning_replay")]
    for body in responses.requests[2:]:  # for the rest of the session
        assert "include" not in body
        assert all(i["type"] != "reasoning" for i in body["input"])
    assert_replays(tmp_path, first["session_id"])


def test_a_compressed_session_keeps_encrypted_reasoning_off_in_its_child(responses, tmp_path):
    responses.script(*_rejected_replay(), ResponsesReply.text("Again 5."),
        ResponsesReply.text("Still 5."),
        ResponsesReply.text("The user added 2 and 3, thrice."),  # the compression's summary
        ResponsesReply.function_calls([("add", '{"a": 1, "b": 1}')], reasoning="again",
                                      encrypted=True),
        ResponsesReply.text("2."))
    with agent(responses, tmp_path, "codex_responses", stream=False, reasoning="low",
               protect_last_n=2) as a:
        first = a.run_conversation("Add 2 and 3.")
        # Long enough that a summary is smaller than what it replaces (rules 9).
        a.run_conversation("And again? " + "Show the sum and how you got it. " * 10)
        a.run_conversation("And once more?")
        assert a.compress()
        child = a.run_conversation("And 1 and 1?")
    assert child["completed"] and child["session_id"] != first["session_id"]
    # The child goes on without asking for, or sending back, encrypted reasoning.
    for body in responses.requests[-2:]:
        assert "include" not in body
        assert all(i["type"] != "reasoning" for i in body["input"])
    assert_replays(tmp_path, first["session_id"])
    assert_replays(tmp_path, child["session_id"])


def test_a_reasoning_only_reply_is_continued(responses, tmp_path):
    responses.script(ResponsesReply.reasoning_only("thinking it over"),
                     ResponsesReply.text("Here it is."))
    with agent(responses, tmp_path, "codex_responses", reasoning="low") as a:
        result = a.run_conversation("Answer me.")
    assert result["completed"] and result["final_response"] == "Here it is."
    assert result["last_reasoning"] == "thinking it over"
    assert_replays(tmp_path, result["session_id"])


# --- chat completions: <think> in content, reasoning_effort -----------------------------------

@STREAM
def test_think_blocks_in_chat_content_are_reasoning_never_the_answer(server, tmp_path, stream):
    server.script(
        Reply.tool_calls([("add", '{"a": 2, "b": 3}')], content="<think>I need to add.</think>"),
        Reply.text("<think>It is 5.</think>\n\nThe sum is 5."))
    deltas: list[str] = []
    thoughts: list[str] = []
    with agent(server, tmp_path, "chat_completions", stream=stream, reasoning="high") as a:
        result = a.run_conversation("Add 2 and 3.", stream_callback=deltas.append,
                                    reasoning_callback=thoughts.append)
    assert result["completed"], result["error"]
    assert result["final_response"] == "The sum is 5."
    assert result["last_reasoning"] == "It is 5."
    assert all(b["reasoning_effort"] == "high" for b in server.requests)
    assert "<think>" not in json.dumps(server.requests[1]["messages"])
    if stream:
        assert "".join(deltas) == "The sum is 5."
        assert "".join(thoughts) == "I need to add.It is 5."
    assert_replays(tmp_path, result["session_id"])


def test_a_turn_sets_its_own_reasoning_over_the_provider(server, tmp_path):
    server.script(Reply.text("one"), Reply.text("two"))
    with agent(server, tmp_path, "chat_completions", reasoning="low") as a:
        a.run_conversation("first", reasoning_effort="high")
        result = a.run_conversation("second")
        with pytest.raises(UsageError, match="reasoning_effort"):
            a.run_conversation("third", reasoning_effort="extreme")
    assert [b["reasoning_effort"] for b in server.requests] == ["high", "low"]
    assert_replays(tmp_path, result["session_id"])


def test_thinking_cut_at_the_output_limit_in_chat_content(server, tmp_path):
    server.script(Reply.text("<think>still going", finish_reason="length"))
    with agent(server, tmp_path, "chat_completions") as a:
        result = a.run_conversation("Think.")
    assert result["turn_exit_reason"] == "thinking_budget_exhausted" and result["failed"]
    assert result["last_reasoning"] == "still going"
    assert_replays(tmp_path, result["session_id"])


# --- fallback: nothing provider-specific leaks ------------------------------------------------

@STREAM
def test_fallback_from_a_thinking_provider_to_a_plain_one(anthropic, server, tmp_path,
                                                          monkeypatch, stream):
    monkeypatch.setenv("FALLBACK_KEY", "sk-fallback-key-1111")
    anthropic.script(AReply.tool_use([("add", '{"a": 2, "b": 3}')], thinking="Add first."),
                     AReply.overloaded())
    server.script(Reply.text("The sum is 5."))
    fallback = {"provider": "plain", "model": "plain-model", "base_url": server.base_url,
                "api_mode": "chat_completions", "key_env": "FALLBACK_KEY"}
    with agent(anthropic, tmp_path, "anthropic_messages", stream=stream, reasoning="medium",
               max_retries=0, fallback_providers=[fallback]) as a:
        result = a.run_conversation("Add 2 and 3.")
    assert result["completed"] and result["final_response"] == "The sum is 5."
    sent = server.requests[0]
    assert "reasoning_effort" not in sent and "reasoning" not in sent
    text = json.dumps(sent["messages"])
    for leak in ("thinking", "signature", "reasoning", "Add first."):
        assert leak not in text
    assert_replays(tmp_path, result["session_id"])


def test_reasoning_from_config_toml_for_the_primary_and_a_fallback(server, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("FALLBACK_KEY", "sk-fallback-key-1111")
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.toml").write_text(
        '[model]\nreasoning = 6000\n\n[[fallback_providers]]\nprovider = "or"\n'
        f'model = "m2"\nbase_url = "{server.base_url}"\napi_mode = "chat_completions"\n'
        'key_env = "FALLBACK_KEY"\nreasoning = "minimal"\n')
    server.script(Reply.error(404, "The model does not exist", code="model_not_found"),
                  Reply.text("ok"))
    with agent(server, tmp_path, "chat_completions", max_retries=0) as a:
        result = a.run_conversation("hi")
    assert result["completed"]
    assert [b["reasoning_effort"] for b in server.requests] == ["medium", "minimal"]
    (tmp_path / "config.toml").write_text("[model]\nreasoning = true\n")
    with pytest.raises(UsageError, match="reasoning"):
        agent(server, tmp_path, "chat_completions")
