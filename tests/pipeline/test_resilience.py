"""End-to-end: the resilience chain (retry, credential pool, refresh, fallback, continuation,
interrupts, rate-limit headers) through a real ``Agent`` over real HTTP against the in-tree
fake servers. Every test also checks the decisions it caused in the event log and that the
session replays identically."""

from __future__ import annotations

import json
import statistics
import threading
import time
from typing import Any

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.testing import FakeClock
from stages.fold import fold
from stages.log.state import State
from stages.prompt.untrusted import unwrapped
from tests.fake_anthropic import FakeAnthropicServer
from tests.fake_anthropic import Reply as AReply
from tests.fake_openai import Reply
from tests.fake_responses import FakeResponsesServer, ResponsesReply

SECRETS = {
    "KEY_A": "sk-test-aaaaaaaaaaaaaaaaaaaaaaaa",
    "KEY_B": "sk-test-bbbbbbbbbbbbbbbbbbbbbbbb",
    "ANTHROPIC_TEST_KEY": "sk-ant-test-cccccccccccccccccccc",
}
PLAIN_KEY = "sk-test-plainplainplainplainplain"
FAST = 0.01  # retry_base_delay: backoffs of 10-15 ms
RATE_LIMITED = {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "20s"}


# --- fixtures and helpers -----------------------------------------------------------------------

@pytest.fixture
def keys(monkeypatch) -> dict[str, str]:
    for label, secret in SECRETS.items():
        monkeypatch.setenv(label, secret)
    return SECRETS


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


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def make(server, home, **kw) -> Agent:
    """An agent on ``server`` with fast backoff; a plain key unless a pool is given."""
    kw.setdefault("retry_base_delay", FAST)
    kw.setdefault("tools", [add])
    if not kw.get("credentials"):
        kw.setdefault("api_key", PLAIN_KEY)
    kw.setdefault("model", "fake-model")
    return Agent(base_url=server.base_url, home=home, **kw)


def anthropic_fallback(srv: FakeAnthropicServer) -> dict[str, str]:
    return {"provider": "anthropic", "model": "claude-fake", "base_url": srv.base_url,
            "api_mode": "anthropic_messages", "key_env": "ANTHROPIC_TEST_KEY"}


def envelopes(home, sid) -> list:
    return list(read_envelopes(session_path(home / "sessions", sid)))


def kinds(home, sid) -> list[str]:
    return [e.kind for e in envelopes(home, sid)]


def payloads(home, sid, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in envelopes(home, sid) if e.kind == kind]


def folded(home, sid) -> State:
    return fold(from_payload(e.kind, e.schema_version, e.payload) for e in envelopes(home, sid))


def assert_replays(home, sid) -> None:
    report = replay(home / "sessions", sid)
    assert report.identical, report.describe()


def labels(server) -> list[str]:
    """The credential label behind each request's key (Bearer or x-api-key)."""
    by_secret = {secret: label for label, secret in SECRETS.items()}
    by_secret[PLAIN_KEY] = "PLAIN"
    out = []
    for headers in server.request_headers:
        secret = headers.get("x-api-key") or headers.get("authorization", "").removeprefix(
            "Bearer ")
        out.append(by_secret.get(secret, secret))
    return out


def recoveries(home, sid) -> list[tuple[str, str]]:
    return [(p["reason"], p["action"]) for p in payloads(home, sid, "recovery_decided")]


def completion_json(content: str) -> str:
    """A whole chat completion, for ``Reply.raw`` (the chat fake only sends extra headers on
    raw and error replies)."""
    return json.dumps({
        "id": "chatcmpl-raw", "object": "chat.completion", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})


# --- 1. retry with backoff ----------------------------------------------------------------------

def test_server_error_is_retried_once_after_a_recorded_backoff(server, home):
    server.script(Reply.error(500, "upstream broke", type="server_error"), Reply.text("fine"))
    with make(server, home) as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["final_response"] == "fine" and result["completed"]
    assert result["api_calls"] == 2
    assert recoveries(home, sid) == [("server_error", "retry")]
    (decided,) = payloads(home, sid, "recovery_decided")
    assert decided["attempt"] == 1
    (waited,) = payloads(home, sid, "waited")
    assert FAST <= waited["seconds"] <= 1.5 * FAST + 1e-9
    assert 0 <= waited["jitter"] < 1
    ks = kinds(home, sid)
    assert ks.index("model_failed") < ks.index("recovery_decided") < ks.index("waited") \
        < ks.index("model_replied")
    assert_replays(home, sid)


def test_overload_past_max_retries_fails_the_turn_clearly(server, home):
    retries = 2
    server.script(*[Reply.error(503, "The server is overloaded", type="server_error")
                    for _ in range(retries + 1)])
    with make(server, home, max_retries=retries) as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["failed"] and not result["completed"] and result["final_response"] is None
    assert "HTTP 503" in result["error"] and "overloaded" in result["error"]
    assert result["turn_exit_reason"] == "model_error(ProviderHTTPError)"
    assert len(server.requests) == retries + 1
    assert recoveries(home, sid) == [("overloaded", "retry")] * retries
    assert [p["attempt"] for p in payloads(home, sid, "recovery_decided")] == [1, 2]
    waits = [p["seconds"] for p in payloads(home, sid, "waited")]
    assert len(waits) == retries and waits[1] >= 2 * FAST  # exponential
    assert kinds(home, sid).count("model_failed") == retries + 1
    assert result["messages"][-1]["content"].startswith("[no reply:")
    assert_replays(home, sid)


def test_retry_after_header_is_honoured(server, home):
    server.script(Reply.error(429, "Rate limit reached for requests", type="requests",
                              code="rate_limit_exceeded", headers={"Retry-After": "0.05"}),
                  Reply.text("after the wait"))
    clock = FakeClock()
    with make(server, home, clock=clock) as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["final_response"] == "after the wait"
    assert recoveries(home, sid) == [("rate_limit", "retry")]
    assert payloads(home, sid, "model_failed")[0]["retry_after"] == 0.05
    (waited,) = payloads(home, sid, "waited")
    assert waited["seconds"] >= 0.05
    assert sum(clock.slept) == pytest.approx(waited["seconds"])
    assert_replays(home, sid)


# --- 2. credential pool -------------------------------------------------------------------------

def test_round_robin_alternates_keys_across_turns(server, home, keys):
    server.script(*[Reply.text(f"answer {i}") for i in range(4)])
    with make(server, home, credentials=["KEY_A", "KEY_B"]) as agent:
        for i in range(4):
            assert agent.chat(f"q{i}") == f"answer {i}"
        sid = agent.session_id
    assert labels(server) == ["KEY_A", "KEY_B", "KEY_A", "KEY_B"]
    assert [p["credential_id"] for p in payloads(home, sid, "credential_selected")] == \
        ["KEY_A", "KEY_B", "KEY_A", "KEY_B"]
    assert "clock_read" in kinds(home, sid)
    text = session_path(home / "sessions", sid).read_text()
    assert not any(secret in text for secret in SECRETS.values())
    assert_replays(home, sid)


def test_429_rotates_to_the_next_key_without_a_retry_and_the_key_rests(server, home, keys):
    server.script(Reply.error(429, "Rate limit reached for requests", type="requests",
                              code="rate_limit_exceeded"),
                  Reply.text("from B"), Reply.text("B again"))
    # No retries at all: the rotation is not one.
    with make(server, home, credentials=["KEY_A", "KEY_B"], max_retries=0) as agent:
        first = agent.run_conversation("one")
        second = agent.run_conversation("two")
    sid = first["session_id"]
    assert first["final_response"] == "from B" and second["final_response"] == "B again"
    # Round robin would give KEY_A on the second turn; KEY_A is resting.
    assert labels(server) == ["KEY_A", "KEY_B", "KEY_B"]
    assert recoveries(home, sid) == [("rate_limit", "rotate")]
    assert payloads(home, sid, "recovery_decided")[0]["credential_id"] == "KEY_A"
    assert payloads(home, sid, "recovery_decided")[0]["attempt"] == 0
    assert "waited" not in kinds(home, sid)
    pool = folded(home, sid).pools[0]
    assert pool.cooling_until("KEY_A") is not None and pool.cooling_until("KEY_B") is None
    assert_replays(home, sid)


@pytest.mark.parametrize("strategy, expected", [
    # A 429 (rests 0.3 s) -> B | B (A rests) | (A awake) A | then:
    ("least_used", ["KEY_A", "KEY_B", "KEY_B", "KEY_A", "KEY_A"]),   # tie 2:2 -> first key
    ("round_robin", ["KEY_A", "KEY_B", "KEY_B", "KEY_A", "KEY_B"]),  # the one after the last
])
def test_strategies_pick_the_expected_keys(server, home, keys, strategy, expected):
    server.script(Reply.error(429, "Rate limit reached", type="requests",
                              code="rate_limit_exceeded", headers={"Retry-After": "0.3"}),
                  *[Reply.text(f"t{i}") for i in range(4)])
    clock = FakeClock()
    with make(server, home, credentials=["KEY_A", "KEY_B"], credential_strategy=strategy,
              clock=clock) as agent:
        agent.chat("1")
        agent.chat("2")
        clock.advance(0.35)
        agent.chat("3")
        agent.chat("4")
        sid = agent.session_id
    assert labels(server) == expected
    pool = folded(home, sid).pools[0]
    assert pool.strategy == strategy
    assert (pool.uses_of("KEY_A"), pool.uses_of("KEY_B")) == (
        expected.count("KEY_A"), expected.count("KEY_B"))
    assert_replays(home, sid)


def test_402_billing_rests_the_key_and_rotates(server, home, keys):
    server.script(Reply.error(402, "You exceeded your current quota, please check your plan "
                              "and billing details.", type="insufficient_quota",
                              code="insufficient_quota"),
                  Reply.text("paid by B"), Reply.text("still B"))
    with make(server, home, credentials=["KEY_A", "KEY_B"]) as agent:
        first = agent.run_conversation("one")
        agent.run_conversation("two")
    sid = first["session_id"]
    assert first["final_response"] == "paid by B"
    assert labels(server) == ["KEY_A", "KEY_B", "KEY_B"]
    assert recoveries(home, sid) == [("billing", "rotate")]
    assert "waited" not in kinds(home, sid)
    state = folded(home, sid)
    decided_at = payloads(home, sid, "recovery_decided")[0]["at"]
    # Billing rests far longer than a rate limit (default 3600 s).
    assert state.pools[0].cooling_until("KEY_A") == pytest.approx(decided_at + 3600.0)
    assert_replays(home, sid)


def test_exhausted_pool_falls_back_on_billing(server, anthropic, home, keys):
    quota = Reply.error(402, "You exceeded your current quota", type="insufficient_quota",
                        code="insufficient_quota")
    server.script(quota, quota)
    anthropic.script(AReply.text("from the fallback"), AReply.text("fallback again"))
    with make(server, home, credentials=["KEY_A", "KEY_B"],
              fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        first = agent.run_conversation("one")
        second = agent.run_conversation("two")
    sid = first["session_id"]
    assert first["final_response"] == "from the fallback" and first["completed"]
    assert labels(server) == ["KEY_A", "KEY_B"]
    assert labels(anthropic) == ["ANTHROPIC_TEST_KEY", "ANTHROPIC_TEST_KEY"]
    assert recoveries(home, sid) == [("billing", "rotate"), ("billing", "fallback")]
    assert payloads(home, sid, "recovery_decided")[1]["provider_index"] == 1
    assert payloads(home, sid, "credential_selected")[2] == {
        "provider_index": 1, "credential_id": "ANTHROPIC_TEST_KEY"}
    # The primary left for a quota reason: the next turn (within the cooldown) stays on the
    # fallback rather than asking the resting keys again.
    assert second["final_response"] == "fallback again"
    assert_replays(home, sid)


def test_exhausted_pool_falls_back_on_rate_limits_without_spinning(server, anthropic, home,
                                                                      keys):
    limited = Reply.error(429, "Rate limit reached for requests", type="requests",
                          code="rate_limit_exceeded")
    server.default = limited  # however often the spent keys are asked
    anthropic.script(AReply.text("from the fallback"))
    with make(server, home, credentials=["KEY_A", "KEY_B"], max_retries=2,
              fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        result = agent.run_conversation("one")
    sid = result["session_id"]
    assert result["final_response"] == "from the fallback"
    assert labels(server) == ["KEY_A", "KEY_B"]
    decided = recoveries(home, sid)
    assert decided[0] == ("rate_limit", "rotate")
    assert decided[-1] in (("rate_limit", "fallback"), ("credentials_exhausted", "fallback"))
    assert "waited" not in kinds(home, sid)
    assert_replays(home, sid)


def test_pool_state_survives_a_restart(server, home, keys):
    server.script(Reply.error(429, "Rate limit reached", type="requests",
                              code="rate_limit_exceeded"),
                  Reply.text("from B"), Reply.text("resumed on B"))
    with make(server, home, credentials=["KEY_A", "KEY_B"]) as agent:
        sid = agent.run_conversation("one")["session_id"]
    with make(server, home, credentials=["KEY_A", "KEY_B"], session_id=sid) as again:
        result = again.run_conversation("two")
    assert result["final_response"] == "resumed on B"
    # After "B" round robin says A; A still rests, as the new process folded from the log.
    assert labels(server) == ["KEY_A", "KEY_B", "KEY_B"]
    assert "session_resumed" in kinds(home, sid)
    assert folded(home, sid).pools[0].cooling_until("KEY_A") is not None
    assert_replays(home, sid)


# --- 3. auth failures and the refresh hook ------------------------------------------------------

def test_401_runs_the_refresh_hook_once_and_retries_with_the_new_key(server, home, keys):
    fresh = "sk-test-refreshedrefreshedrefreshed"
    calls: list[str] = []

    def refresh(label: str) -> str:
        calls.append(label)
        return fresh

    server.script(Reply.error(401, "Incorrect API key provided", code="invalid_api_key"),
                  Reply.text("authorised"))
    with make(server, home, credentials=["KEY_A", "KEY_B"], credential_refresh=refresh,
              credential_strategy="fill_first") as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["final_response"] == "authorised"
    assert calls == ["KEY_A"]
    auth = [h["authorization"] for h in server.request_headers]
    assert auth == [f"Bearer {SECRETS['KEY_A']}", f"Bearer {fresh}"]
    assert recoveries(home, sid) == [("auth", "refresh")]
    assert payloads(home, sid, "credential_refreshed") == [
        {"credential_id": "KEY_A", "refreshed": True}]
    assert [p["credential_id"] for p in payloads(home, sid, "credential_selected")] == \
        ["KEY_A", "KEY_A"]
    assert "waited" not in kinds(home, sid)
    assert_replays(home, sid)


def test_refreshed_key_is_the_one_retried_under_round_robin(server, home, keys):
    """The refresh decision says "then call again with the same key"."""
    fresh = "sk-test-refreshedrefreshedrefreshed"
    server.script(Reply.error(401, "Incorrect API key provided", code="invalid_api_key"),
                  Reply.text("authorised"))
    with make(server, home, credentials=["KEY_A", "KEY_B"],
              credential_refresh=lambda label: fresh) as agent:
        result = agent.run_conversation("hi")
    assert result["final_response"] == "authorised"
    assert [h["authorization"] for h in server.request_headers] == [
        f"Bearer {SECRETS['KEY_A']}", f"Bearer {fresh}"]
    assert_replays(home, result["session_id"])


def test_second_401_rests_the_key_and_rotates(server, home, keys):
    calls: list[str] = []
    bad = Reply.error(401, "Incorrect API key provided", code="invalid_api_key")
    server.script(bad, bad, Reply.text("B works"), Reply.text("B again"))
    with make(server, home, credentials=["KEY_A", "KEY_B"], credential_strategy="fill_first",
              credential_refresh=lambda label: calls.append(label) or
              "sk-test-stillbadstillbadstillbad") as agent:
        result = agent.run_conversation("hi")
        agent.run_conversation("again")
    sid = result["session_id"]
    assert result["final_response"] == "B works"
    assert calls == ["KEY_A"]  # once, not on the second failure
    assert labels(server)[2:] == ["KEY_B", "KEY_B"]  # fill_first, yet A rests
    assert recoveries(home, sid) == [("auth", "refresh"), ("auth", "rotate")]
    assert folded(home, sid).pools[0].cooling_until("KEY_A") is not None
    assert_replays(home, sid)


def test_401_without_a_refresh_hook_rotates(server, home, keys):
    server.script(Reply.error(401, "Incorrect API key provided", code="invalid_api_key"),
                  Reply.text("B works"))
    with make(server, home, credentials=["KEY_A", "KEY_B"],
              credential_strategy="fill_first") as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["final_response"] == "B works"
    assert labels(server) == ["KEY_A", "KEY_B"]
    assert [p["action"] for p in payloads(home, sid, "recovery_decided")][-1] == "rotate"
    assert_replays(home, sid)


# --- 4. fallback providers ----------------------------------------------------------------------

def test_model_not_found_falls_back_to_anthropic_for_this_turn_only(server, anthropic, home,
                                                                    keys):
    server.script(Reply.error(404, "The model `fake-model` does not exist or you do not have "
                              "access to it.", code="model_not_found"),
                  Reply.text("primary is back"))
    anthropic.script(AReply.text("fallback answer"))
    with make(server, home, fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        first = agent.run_conversation("one")
        second = agent.run_conversation("two")
    sid = first["session_id"]
    assert first["final_response"] == "fallback answer" and first["completed"]
    assert second["final_response"] == "primary is back"
    assert len(server.requests) == 2 and len(anthropic.requests) == 1
    assert labels(anthropic) == ["ANTHROPIC_TEST_KEY"]
    assert anthropic.requests[0]["model"] == "claude-fake"
    assert recoveries(home, sid) == [("model_not_found", "fallback")]
    assert "waited" not in kinds(home, sid)  # not retryable: straight to the fallback
    models = [p["model"] for p in payloads(home, sid, "model_requested")]
    assert models == ["fake-model", "claude-fake", "fake-model"]
    assert_replays(home, sid)


def test_overload_falls_back_once_retries_are_spent(server, anthropic, home, keys):
    server.script(*[Reply.error(503, "overloaded", type="server_error") for _ in range(2)])
    anthropic.script(AReply.text("fallback answer"))
    with make(server, home, max_retries=1,
              fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        result = agent.run_conversation("one")
    sid = result["session_id"]
    assert result["final_response"] == "fallback answer"
    assert recoveries(home, sid) == [("overloaded", "retry"), ("overloaded", "fallback")]
    assert kinds(home, sid).count("waited") == 1
    assert_replays(home, sid)


def test_rate_limited_primary_stays_benched_for_the_next_turn(server, anthropic, home, keys):
    server.script(Reply.error(429, "Rate limit reached", type="requests",
                              code="rate_limit_exceeded", headers={"Retry-After": "0"}))
    anthropic.script(AReply.text("fallback one"), AReply.text("fallback two"))
    with make(server, home, max_retries=0,
              fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        first = agent.run_conversation("one")
        second = agent.run_conversation("two")
    sid = first["session_id"]
    assert first["final_response"] == "fallback one"
    assert second["final_response"] == "fallback two"
    assert len(server.requests) == 1 and len(anthropic.requests) == 2
    assert recoveries(home, sid) == [("rate_limit", "fallback")]
    assert folded(home, sid).primary_rest_until is not None
    assert_replays(home, sid)


def test_a_failing_fallback_ends_the_turn_clearly(server, anthropic, home, keys):
    server.script(Reply.error(404, "model not found", code="model_not_found"))
    anthropic.script(AReply.error(404, "model: claude-fake", type="not_found_error"))
    with make(server, home, fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        result = agent.run_conversation("one")
    sid = result["session_id"]
    assert result["failed"] and "404" in result["error"]
    assert recoveries(home, sid) == [("model_not_found", "fallback")]
    assert_replays(home, sid)


# --- 5. each API mode end to end ----------------------------------------------------------------

@pytest.mark.parametrize("stream", [True, False])
def test_chat_completions_tool_round_trip(server, home, stream):
    server.script(Reply.tool_calls([("add", '{"a": 2, "b": 40}')]), Reply.text("It is 42."))
    deltas: list[str] = []
    with make(server, home, stream=stream) as agent:
        result = agent.run_conversation("2+40?", stream_callback=deltas.append)
    assert result["final_response"] == "It is 42."
    assert [m["role"] for m in result["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert result["messages"][2]["content"] == "42"
    assert ("".join(deltas) == "It is 42.") if stream else deltas == []
    assert server.requests[1]["messages"][-1]["role"] == "tool"
    assert result["usage"]["input_tokens"] > 0 and result["usage"]["output_tokens"] > 0
    assert payloads(home, result["session_id"], "session_started")[0]["settings"][
        "api_mode"] == "chat_completions"
    assert_replays(home, result["session_id"])


@pytest.mark.parametrize("stream", [True, False])
def test_codex_responses_tool_round_trip(responses, home, stream):
    from tests.fake_responses import Usage as RUsage
    responses.script(ResponsesReply.function_calls([("add", '{"a": 2, "b": 40}')],
                                                   ids=["call_r1"]),
                     ResponsesReply.text("It is 42.", reasoning="adding",
                                         usage=RUsage(prompt=50, completion=8, cached=20,
                                                      reasoning=3)))
    deltas: list[str] = []
    with make(responses, home, api_mode="codex_responses", stream=stream) as agent:
        result = agent.run_conversation("2+40?", stream_callback=deltas.append)
    sid = result["session_id"]
    assert result["final_response"] == "It is 42."
    tool_result = result["messages"][2]
    assert (tool_result["role"], tool_result["content"], tool_result["tool_call_id"]) == (
        "tool", "42", "call_r1")
    assert ("".join(deltas) == "It is 42.") if stream else deltas == []
    second = responses.requests[1]
    assert second["store"] is False and "instructions" in second
    [sent] = [i for i in second["input"] if i["type"] == "function_call_output"]
    assert (sent["call_id"], unwrapped(sent["output"])) == ("call_r1", "42")
    assert sent["output"].startswith("<<data ")  # rules 7: sent as a data block
    assert responses.request_headers[0]["authorization"] == f"Bearer {PLAIN_KEY}"
    last = payloads(home, sid, "model_replied")[-1]["usage"]
    assert last == {"input_tokens": 30, "output_tokens": 8, "cache_read_tokens": 20,
                    "cache_write_tokens": 0, "reasoning_tokens": 3}
    settings = payloads(home, sid, "session_started")[0]["settings"]
    assert settings["api_mode"] == "codex_responses"
    assert settings["api_mode_reason"].startswith("explicit")
    assert_replays(home, sid)


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_messages_tool_round_trip_with_cache_marks(anthropic, home, stream):
    from tests.fake_anthropic import Usage as AUsage
    anthropic.script(AReply.tool_use([("add", '{"a": 2, "b": 40}')], ids=["toolu_1"],
                                     content="Let me add."),
                     AReply.text("It is 42.", thinking="adding",
                                 usage=AUsage(input=30, output=7, cache_read=100,
                                              cache_write=50)))
    deltas: list[str] = []
    with make(anthropic, home, provider="anthropic", model="claude-fake",
              stream=stream) as agent:
        result = agent.run_conversation("2+40?", stream_callback=deltas.append)
    sid = result["session_id"]
    assert result["final_response"] == "It is 42."
    assert [m["role"] for m in result["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert ("".join(deltas) == "Let me add.It is 42.") if stream else deltas == []
    assert anthropic.request_headers[0]["x-api-key"] == PLAIN_KEY
    assert "authorization" not in anthropic.request_headers[0]
    assert result["usage"]["cache_read_tokens"] >= 100
    assert result["usage"]["cache_write_tokens"] >= 50
    last = payloads(home, sid, "model_replied")[-1]["usage"]
    # The reply thought: its reasoning is inside output_tokens, which Anthropic does not split.
    assert last == {"input_tokens": 30, "output_tokens": 7, "cache_read_tokens": 100,
                    "cache_write_tokens": 50, "reasoning_tokens": 0,
                    "reasoning_in_output": True}
    # The tool round trip: tool_result sent back in a user turn.
    second = anthropic.requests[1]
    results = [b for m in second["messages"] if m["role"] == "user"
               for b in (m["content"] if isinstance(m["content"], list) else [])
               if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_1"]
    for body in anthropic.requests:
        marks = cache_controls(body)
        assert 1 <= len(marks) <= 4
        assert isinstance(body["system"], list) and "cache_control" in body["system"][-1]
        assert "cache_control" in last_block(body["messages"][-1])
        assert all(m == {"type": "ephemeral"} or m.get("type") == "ephemeral" for m in marks)
    settings = payloads(home, sid, "session_started")[0]["settings"]
    assert settings["api_mode"] == "anthropic_messages"
    assert_replays(home, sid)


def cache_controls(body: dict) -> list[dict]:
    found: list[dict] = []
    system = body.get("system")
    for block in system if isinstance(system, list) else ():
        if "cache_control" in block:
            found.append(block["cache_control"])
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else ():
            if "cache_control" in block:
                found.append(block["cache_control"])
    return found


def last_block(message: dict) -> dict:
    content = message["content"]
    return content[-1] if isinstance(content, list) else {}


def test_anthropic_cache_marks_cap_at_four_and_honour_ttl(anthropic, home):
    anthropic.script(*[AReply.text(f"a{i}") for i in range(4)])
    with make(anthropic, home, provider="anthropic", model="claude-fake",
              cache_ttl="1h") as agent:
        for i in range(4):
            agent.chat(f"q{i}")
        sid = agent.session_id
    body = anthropic.requests[-1]
    marks = cache_controls(body)
    assert len(marks) == 4
    assert all(m.get("ttl") == "1h" for m in marks)
    marked = [i for i, m in enumerate(body["messages"])
              if any("cache_control" in b for b in (m["content"] if isinstance(m["content"], list)
                                                    else []))]
    assert marked == [len(body["messages"]) - 3, len(body["messages"]) - 2,
                      len(body["messages"]) - 1]
    assert_replays(home, sid)


def test_anthropic_without_prompt_caching_sends_no_cache_control(anthropic, home):
    anthropic.script(AReply.text("a"), AReply.text("b"))
    with make(anthropic, home, provider="anthropic", model="claude-fake",
              prompt_caching=False) as agent:
        agent.chat("one")
        agent.chat("two")
        sid = agent.session_id
    for body in anthropic.requests:
        assert cache_controls(body) == []
        assert "cache_control" not in json.dumps(body)
    assert_replays(home, sid)


# --- the same failures through each adapter -----------------------------------------------------

MODES = ["chat_completions", "codex_responses", "anthropic_messages"]


@pytest.fixture
def endpoint(request):
    """(server, agent options, reply builders) for one API mode."""
    mode = request.param
    if mode == "chat_completions":
        from tests.fake_openai import FakeOpenAIServer
        srv, options = FakeOpenAIServer(), {}
        text = Reply.text
        transient = Reply.error(500, "upstream broke", type="server_error")
        auth = Reply.error(401, "Incorrect API key provided", code="invalid_api_key")
        cut = Reply.drop_stream(after_chunks=3, content="Partial answer that gets cut")
    elif mode == "codex_responses":
        srv, options = FakeResponsesServer(), {"api_mode": "codex_responses"}
        text = ResponsesReply.text
        transient = ResponsesReply.error(500, "upstream broke", type="server_error")
        auth = ResponsesReply.error(401, "Incorrect API key provided", code="invalid_api_key")
        cut = ResponsesReply.drop_stream(after_deltas=3, content="Partial answer that gets cut")
    else:
        srv = FakeAnthropicServer()
        options = {"provider": "anthropic", "model": "claude-fake"}
        text = AReply.text
        transient = AReply.overloaded()
        auth = AReply.error(401, "invalid x-api-key", type="authentication_error")
        cut = AReply.drop_stream(after_events=5, content="Partial answer that gets cut")
    with srv:
        yield mode, srv, options, {"text": text, "transient": transient, "auth": auth,
                                   "cut": cut}
        srv.assert_done()


@pytest.mark.parametrize("endpoint", MODES, indirect=True)
def test_each_mode_retries_a_transient_failure(endpoint, home):
    _mode, srv, options, replies = endpoint
    srv.script(replies["transient"], replies["text"]("recovered"))
    with make(srv, home, **options) as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["final_response"] == "recovered"
    (reason, action), = recoveries(home, sid)
    assert action == "retry" and reason in ("server_error", "overloaded")
    assert kinds(home, sid).count("waited") == 1
    assert_replays(home, sid)


@pytest.mark.parametrize("endpoint", MODES, indirect=True)
def test_each_mode_does_not_reissue_a_partly_delivered_answer(endpoint, home):
    _mode, srv, options, replies = endpoint
    srv.script(replies["cut"])
    deltas: list[str] = []
    with make(srv, home, **options) as agent:
        result = agent.run_conversation("hi", stream_callback=deltas.append)
    sid = result["session_id"]
    assert deltas and "".join(deltas) in "Partial answer that gets cut"
    assert result["failed"] and result["error"] and result["final_response"] is None
    assert len(srv.requests) == 1
    assert payloads(home, sid, "model_failed")[0]["partial"] is True
    assert "recovery_decided" not in kinds(home, sid)
    assert_replays(home, sid)


@pytest.mark.parametrize("endpoint", MODES, indirect=True)
def test_each_mode_sends_the_refreshed_key(endpoint, home, keys, monkeypatch):
    _mode, srv, options, replies = endpoint
    monkeypatch.setenv("POOL_KEY", "sk-test-poolpoolpoolpoolpoolpool")
    fresh = "sk-test-refreshedrefreshedrefreshed"
    srv.script(replies["auth"], replies["text"]("authorised"))
    with make(srv, home, credentials=["POOL_KEY"], credential_refresh=lambda label: fresh,
              **options) as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    sent = [h.get("x-api-key") or h.get("authorization", "").removeprefix("Bearer ")
            for h in srv.request_headers]
    assert sent == ["sk-test-poolpoolpoolpoolpoolpool", fresh]
    assert result["final_response"] == "authorised"
    assert payloads(home, sid, "credential_refreshed") == [
        {"credential_id": "POOL_KEY", "refreshed": True}]
    assert_replays(home, sid)


# --- 6. incomplete Responses replies ------------------------------------------------------------

def test_reasoning_only_replies_are_continued_then_fail_over(responses, anthropic, home, keys):
    responses.script(*[ResponsesReply.reasoning_only("thinking...") for _ in range(4)])
    anthropic.script(AReply.text("finally an answer"))
    with make(responses, home, api_mode="codex_responses",
              fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        result = agent.run_conversation("hard question")
    sid = result["session_id"]
    assert result["final_response"] == "finally an answer" and result["completed"]
    assert len(responses.requests) == 4 and len(anthropic.requests) == 1
    assert kinds(home, sid).count("continuation_requested") == 4
    assert recoveries(home, sid) == [("incomplete_response", "fallback")]
    assert payloads(home, sid, "recovery_decided")[0]["provider_index"] == 1
    assert [p["finish_reason"] for p in payloads(home, sid, "model_replied")] == \
        ["incomplete"] * 4 + ["stop"]
    # Each continuation is a user message asking the model to go on.
    last_input = responses.requests[-1]["input"]
    assert [i["role"] for i in last_input if i.get("type") == "message"].count("user") == 4
    assert_replays(home, sid)


def test_reasoning_only_without_a_fallback_ends_incomplete(responses, home):
    responses.script(*[ResponsesReply.reasoning_only("thinking...") for _ in range(4)])
    with make(responses, home, api_mode="codex_responses") as agent:
        result = agent.run_conversation("hard question")
    sid = result["session_id"]
    assert result["turn_exit_reason"] == "incomplete_response"
    assert not result["completed"]
    assert len(responses.requests) == 4
    assert kinds(home, sid).count("continuation_requested") == 3
    assert_replays(home, sid)


# --- 7. broken streams, hung connections, malformed bodies --------------------------------------

def test_stream_dropped_after_text_reached_the_user_is_not_retried(server, anthropic, home,
                                                                    keys):
    server.script(Reply.drop_stream(after_chunks=3, content="Partial answer that gets cut"))
    deltas: list[str] = []
    with make(server, home, fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        result = agent.run_conversation("hi", stream_callback=deltas.append)
    sid = result["session_id"]
    assert deltas  # part of the answer reached the user
    assert result["failed"] and result["final_response"] is None
    assert "dropped the connection" in result["error"] or "before the reply" in result["error"]
    assert len(server.requests) == 1 and anthropic.requests == []
    (failed,) = payloads(home, sid, "model_failed")
    assert failed["partial"] is True
    assert "recovery_decided" not in kinds(home, sid) and "waited" not in kinds(home, sid)
    assert_replays(home, sid)


def test_stream_dropped_before_any_text_is_retried(server, home):
    server.script(Reply.drop_stream(after_chunks=0), Reply.text("second time lucky"))
    with make(server, home) as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["final_response"] == "second time lucky"
    assert payloads(home, sid, "model_failed")[0]["partial"] is False
    assert recoveries(home, sid) == [("transport", "retry")]
    assert_replays(home, sid)


def test_hung_connection_times_out_and_is_retried(server, home):
    server.script(Reply.hang(5), Reply.text("awake"))
    with make(server, home, timeout=0.5) as agent:
        started = time.monotonic()
        result = agent.run_conversation("hi")
        elapsed = time.monotonic() - started
    sid = result["session_id"]
    assert result["final_response"] == "awake"
    assert elapsed < 3
    assert payloads(home, sid, "model_failed")[0]["error_type"] == "ProviderTimeoutError"
    assert recoveries(home, sid) == [("timeout", "retry")]
    assert_replays(home, sid)


def test_malformed_json_is_retried_then_fails(server, home):
    retries = 2
    server.script(*[Reply.raw(200, b"<html>this is not json</html>")
                    for _ in range(retries + 1)])
    with make(server, home, max_retries=retries) as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["failed"] and "not JSON" in result["error"]
    assert len(server.requests) == retries + 1
    assert recoveries(home, sid) == [("server_error", "retry")] * retries
    assert_replays(home, sid)


# --- 8. interrupts ------------------------------------------------------------------------------

class Interrupter:
    """An event listener that calls ``agent.interrupt()`` from a timer thread ``delay`` seconds
    after the event of ``kind`` was recorded, so the interrupt lands in the intended phase
    however slow the machine; it notes when it fired."""

    def __init__(self, kind: str, delay: float) -> None:
        self.kind, self.delay = kind, delay
        self.agent: Agent | None = None
        self.fired: list[float] = []
        self.timers: list[threading.Timer] = []

    def __call__(self, event: Any) -> None:
        if event.kind == self.kind:
            timer = threading.Timer(self.delay, self.fire)
            self.timers.append(timer)
            timer.start()

    def fire(self) -> None:
        assert self.agent is not None
        self.fired.append(time.perf_counter())
        self.agent.interrupt()


def _interrupt_latencies(agent: Agent, interrupter: Interrupter, runs: int) -> list[float]:
    """Seconds from ``interrupt()`` to ``run_conversation`` returning, per run."""
    interrupter.agent = agent
    latencies: list[float] = []
    for run in range(runs):
        result = agent.run_conversation(f"slow {run}")
        returned = time.perf_counter()
        for timer in interrupter.timers:
            timer.join()
        assert result["interrupted"], result
        assert len(interrupter.fired) == run + 1
        latencies.append(returned - interrupter.fired[-1])
    return latencies


def _report(label: str, latencies: list[float]) -> None:
    ms = [x * 1000 for x in latencies]
    print(f"\n[interrupt latency {label}] n={len(ms)} median={statistics.median(ms):.1f} ms "
          f"max={max(ms):.1f} ms all={[round(x, 1) for x in ms]}")


def test_interrupt_during_a_streaming_model_call_returns_fast(server, home):
    runs = 10
    # A default, not one scripted reply per run: an interrupt that lands before the request
    # is written (the first call imports and connects) sends nothing at all.
    server.default = Reply.text("x" * 400, chunk_delay=0.05)
    interrupter = Interrupter("model_requested", delay=0.15)
    deltas: list[str] = []
    with make(server, home, event_listener=interrupter) as agent:
        interrupter.agent = agent
        latencies = []
        for run in range(runs):
            result = agent.run_conversation(f"slow {run}", stream_callback=deltas.append)
            returned = time.perf_counter()
            for timer in interrupter.timers:
                timer.join()
            assert result["interrupted"] and result["final_response"] is None
            latencies.append(returned - interrupter.fired[-1])
        sid = agent.session_id
    _report("model call", latencies)
    assert max(latencies) < 1.0
    assert deltas  # the answer was streaming when it was cut
    assert kinds(home, sid).count("interrupted") == runs
    assert all(p["during"] == "model_call" for p in payloads(home, sid, "interrupted"))
    assert "model_replied" not in kinds(home, sid)
    finished = payloads(home, sid, "turn_finished")
    assert {p["exit_reason"] for p in finished} == {"interrupted_during_api_call"}
    # No partial answer entered the history.
    history = folded(home, sid).messages
    assert all("xxx" not in (m.content or "") for m in history)
    assert_replays(home, sid)


def test_interrupt_during_a_backoff_wait_returns_fast(server, home):
    runs = 10
    server.script(*[Reply.error(500, "upstream broke", type="server_error")
                    for _ in range(runs)])
    interrupter = Interrupter("recovery_decided", delay=0.05)
    with make(server, home, retry_base_delay=5.0, event_listener=interrupter) as agent:
        latencies = _interrupt_latencies(agent, interrupter, runs)
        sid = agent.session_id
    _report("backoff", latencies)
    assert max(latencies) < 1.0
    assert len(server.requests) == runs  # no retry went out
    interrupted = payloads(home, sid, "interrupted")
    assert len(interrupted) == runs and all(p["during"] == "backoff" for p in interrupted)
    assert "waited" not in kinds(home, sid)
    assert {p["exit_reason"] for p in payloads(home, sid, "turn_finished")} == {
        "interrupted_by_user"}
    assert_replays(home, sid)


# --- 9. rate-limit headers ----------------------------------------------------------------------

def test_spent_rate_limit_headers_rest_the_key_before_a_429(server, home, keys):
    server.script(Reply.raw(200, completion_json("A is spent"), headers=RATE_LIMITED),
                  Reply.text("B answers"))
    with make(server, home, credentials=["KEY_A", "KEY_B"],
              credential_strategy="fill_first") as agent:
        first = agent.run_conversation("one")
        second = agent.run_conversation("two")
    sid = first["session_id"]
    assert first["final_response"] == "A is spent" and second["final_response"] == "B answers"
    assert "requests 100/100" in first["rate_limits"] and "20s" in first["rate_limits"]
    assert labels(server) == ["KEY_A", "KEY_B"]  # fill_first, yet A is skipped
    replied = payloads(home, sid, "model_replied")[0]
    assert ["x-ratelimit-remaining-requests", "0"] in replied["rate_limits"]
    assert ["x-ratelimit-reset-requests", "20s"] in replied["rate_limits"]
    assert "recovery_decided" not in kinds(home, sid)
    state = folded(home, sid)
    bucket = state.rate_limits.bucket("requests")
    assert (bucket.limit, bucket.remaining, bucket.reset_seconds) == (100, 0, 20.0)
    clock = payloads(home, sid, "clock_read")[0]["epoch"]
    assert state.pools[0].cooling_until("KEY_A") == pytest.approx(clock + 20.0, abs=2.0)
    assert_replays(home, sid)


def test_every_key_spent_by_headers_falls_back_as_credentials_exhausted(server, anthropic, home,
                                                                         keys):
    server.script(Reply.raw(200, completion_json("A spent"), headers=RATE_LIMITED),
                  Reply.raw(200, completion_json("B spent"), headers=RATE_LIMITED))
    anthropic.script(AReply.text("fallback while the keys rest"))
    with make(server, home, credentials=["KEY_A", "KEY_B"],
              fallback_providers=[anthropic_fallback(anthropic)]) as agent:
        assert agent.chat("one") == "A spent"
        assert agent.chat("two") == "B spent"
        third = agent.run_conversation("three")
    sid = third["session_id"]
    assert third["final_response"] == "fallback while the keys rest"
    assert labels(server) == ["KEY_A", "KEY_B"]
    assert recoveries(home, sid) == [("credentials_exhausted", "fallback")]
    (decided,) = payloads(home, sid, "recovery_decided")
    assert decided["provider_index"] == 1 and decided["credential_id"] is None
    assert "model_failed" not in kinds(home, sid)  # no 429 was ever needed
    assert_replays(home, sid)


def test_spent_rate_limit_headers_on_responses_and_anthropic(responses, anthropic, home, keys):
    """The Responses and Anthropic adapters record the same headers (Anthropic's own family
    too)."""
    responses.script(ResponsesReply.text("r").with_headers(RATE_LIMITED))
    anthropic.script(AReply.text("a", headers={"anthropic-ratelimit-requests-limit": "50",
                                               "anthropic-ratelimit-requests-remaining": "0",
                                               "anthropic-ratelimit-requests-reset": "30s"}))
    with make(responses, home, api_mode="codex_responses") as agent:
        rid = agent.run_conversation("hi")["session_id"]
    with make(anthropic, home, provider="anthropic", model="claude-fake") as agent:
        aid = agent.run_conversation("hi")["session_id"]
    assert ["x-ratelimit-remaining-requests", "0"] in payloads(home, rid,
                                                               "model_replied")[0]["rate_limits"]
    assert folded(home, rid).rate_limits.bucket("requests").remaining == 0
    assert ["anthropic-ratelimit-requests-remaining", "0"] in payloads(
        home, aid, "model_replied")[0]["rate_limits"]
    assert folded(home, aid).rate_limits.bucket("requests").reset_seconds == 30.0
    assert_replays(home, rid)
    assert_replays(home, aid)


# --- 10. secrets that appear mid-session --------------------------------------------------------

def test_a_refreshed_key_echoed_by_the_server_never_reaches_the_log(server, home, keys):
    """No pattern matches this key: only the live set of known secrets can mask it."""
    fresh = "renewed-credential-4f9a8b7c6d5e"
    server.script(Reply.error(401, "Incorrect API key provided", code="invalid_api_key"),
                  Reply.error(500, f"upstream broke while checking {fresh}", type="server_error"),
                  Reply.text(f"your new key is {fresh}"))
    with make(server, home, credentials=["KEY_A"], credential_refresh=lambda label: fresh,
              max_retries=2) as agent:
        result = agent.run_conversation("hi")
    sid = result["session_id"]
    assert result["completed"]
    assert [h["authorization"] for h in server.request_headers][1:] == [f"Bearer {fresh}"] * 2
    assert [p["status"] for p in payloads(home, sid, "model_failed")] == [401, 500]
    text = session_path(home / "sessions", sid).read_text()
    assert fresh not in text and fresh[:6] in text  # masked, not dropped
    assert fresh not in json.dumps(result)
    assert_replays(home, sid)
