"""``Agent.fork`` / ``pipeline.agent.fork_session``: the prefix replays exactly, the fork goes on
live with its own settings, and the fork replays."""

from __future__ import annotations

import json
import re

import pytest

from effects.eventlog.store import read_envelopes, session_path
from effects.performers import Effects
from pipeline.agent import Agent, fork_session
from pipeline.providers import ProviderRouter
from pipeline.settings import AgentSettings
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock
from pipeline.tools import tool
from stages.errors import ReplayDivergenceError, UsageError
from stages.log.events import SessionForked, SessionSettings
from tests.fake_openai import FakeOpenAIServer, Reply


@tool(read_only=True)
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return f"found {query}"


def _replies() -> list[Reply]:
    return [Reply.tool_calls([("lookup", '{"query": "a"}')], ids=["c1"]),
            Reply.text("answer one"), Reply.text("answer two")]


@pytest.fixture(scope="module")
def srv():
    with FakeOpenAIServer(default=Reply.text("unscripted")) as server:
        yield server


def _agent(srv, home, prefix: str = "session", listener=None, **changes) -> Agent:
    settings = SessionSettings(model="m", provider="openai", base_url=srv.base_url,
                               stream=False, **changes)
    return Agent(settings=settings, agent_settings=AgentSettings(home=home, durability="flush"),
                 effects=Effects(clock=FakeClock(), ids=CountingIds(prefix=prefix),
                                 model=ProviderRouter(default_key="sk-fork-test", keys={})),
                 tools=[lookup], event_listener=listener)


def _record(srv, home) -> str:
    srv.reset()
    srv.script(*_replies())
    with _agent(srv, home) as agent:
        agent.run("one")
        agent.run("two")
        assert agent.session_id is not None
        return agent.session_id


def _log(home, session_id):
    return list(read_envelopes(session_path(home / "sessions", session_id)))


def _lines(home, session_id) -> list[bytes]:
    return session_path(home / "sessions", session_id).read_bytes().splitlines()


def _unchained(line: bytes, session_id: str) -> bytes:
    line = line.replace(f'"session_id":"{session_id}"'.encode(), b'"session_id":"-"', 1)
    line = re.sub(rb'"(prev_hash|hash)":"[0-9a-f]{64}"', rb'"\1":"-"', line)
    # The signature signs the seal, which holds the session id and the chain.
    return re.sub(rb'"sig":"[0-9a-f]{16}:[0-9a-f]{64}"', rb'"sig":"-"', line)


def _measured(payload: dict) -> str:
    """The payload without what is measured, not decided (latencies and durations)."""
    return re.sub(r'"(latency_ms|duration_ms)": [0-9.e-]+', r'"\1": 0', json.dumps(payload))


def _replies_after(origin, at: int) -> list[Reply]:
    used = sum(1 for e in origin[:at] if e.kind == "model_replied")
    return _replies()[used:]


def test_a_fork_at_every_seq_repeats_the_prefix_and_goes_on_as_the_original(srv, tmp_path):
    home = tmp_path / "home"
    origin_id = _record(srv, home)
    origin = _log(home, origin_id)
    for at in range(1, len(origin) + 1):
        srv.reset()
        srv.script(*_replies_after(origin, at))
        made = fork_session(_agent(srv, home, prefix=f"fork{at}_"), origin_id, at=at)
        made.agent.close()
        fork = _log(home, made.session_id)
        # The prefix, record for record: payload and time; seq 0 with the fork's own id.
        assert fork[0].payload == {**origin[0].payload, "session_id": made.session_id}
        assert [(e.kind, e.schema_version, e.payload, e.recorded_at) for e in fork[1:at]] == [
            (e.kind, e.schema_version, e.payload, e.recorded_at) for e in origin[1:at]]
        assert fork[0].recorded_at == origin[0].recorded_at
        # Byte for byte: the lines differ only in the session id and the hashes chaining them.
        assert [_unchained(line, made.session_id) for line in _lines(home, made.session_id)[1:at]
                ] == [_unchained(line, origin_id) for line in _lines(home, origin_id)[1:at]]
        # Same settings, same server replies: the fork goes on as the original did.
        switch = next(i for i, e in enumerate(fork) if e.kind == SessionForked.kind)
        assert fork[switch].payload["origin_seq"] == at
        assert fork[switch].payload["origin_session_id"] == origin_id
        went_on = [(e.kind, _measured(e.payload)) for e in fork[switch + 1:]
                   if e.kind != "tools_declared"]
        assert went_on == [(e.kind, _measured(e.payload))
                           for e in origin[switch:switch + len(went_on)]]
        # Nothing in between: the prefix ends where the fork's own records begin.
        assert [e.kind for e in fork[at:switch]] == [e.kind for e in origin[at:switch]]
        assert replay(home / "sessions", made.session_id).identical


def test_a_fork_s_listener_hears_its_live_records_not_the_replayed_prefix(srv, tmp_path):
    home = tmp_path / "home"
    origin_id = _record(srv, home)
    origin = _log(home, origin_id)
    for at in (1, next(e.seq for e in origin if e.kind == "tool_ran"), len(origin)):
        srv.reset()
        srv.script(*_replies_after(origin, at))
        heard: list[str] = []
        made = fork_session(_agent(srv, home, prefix=f"heard{at}_",
                                   listener=lambda e: heard.append(e.kind)), origin_id, at=at)
        made.agent.close()
        assert heard == [e.kind for e in _log(home, made.session_id)[at:]]


def test_a_fork_inside_a_turn_finishes_it_and_returns_its_result(srv, tmp_path):
    home = tmp_path / "home"
    origin_id = _record(srv, home)
    origin = _log(home, origin_id)
    at = next(e.seq for e in origin if e.kind == "tool_ran")  # before the tool result
    srv.reset()
    srv.script(*_replies_after(origin, at))
    made = fork_session(_agent(srv, home, prefix="f"), origin_id, at=at)
    assert made.continued is not None and made.continued.final_response == "answer one"
    assert made.origin_session_id == origin_id and made.origin_seq == at
    with made.agent as forked:
        assert forked.session_id == made.session_id
        srv.reset()
        srv.script(Reply.text("after the fork"))
        assert forked.chat("and then?") == "after the fork"
    assert replay(home / "sessions", made.session_id).identical


def test_a_fork_with_another_model_sends_it_from_the_next_step(srv, tmp_path):
    home = tmp_path / "home"
    origin_id = _record(srv, home)
    origin = _log(home, origin_id)
    at = next(e.seq for e in origin if e.kind == "model_requested")
    srv.reset()
    srv.script(*_replies_after(origin, at))
    with _agent(srv, home, prefix="f") as agent:
        forked = agent.fork(origin_id, at=at, model="other-model", max_tokens=77)
    forked.close()
    assert [r["model"] for r in srv.requests] == ["other-model", "other-model"]
    assert all(r.get("max_tokens", r.get("max_completion_tokens")) == 77 for r in srv.requests)
    log = _log(home, forked.session_id)
    switch = next(e for e in log if e.kind == SessionForked.kind)
    assert switch.payload["settings"]["model"] == "other-model"
    assert switch.seq == at  # the origin's first records, then the switch where they stop
    assert replay(home / "sessions", forked.session_id).identical


def test_a_fork_between_turns_leaves_the_next_turn_to_the_caller(srv, tmp_path):
    home = tmp_path / "home"
    origin_id = _record(srv, home)
    origin = _log(home, origin_id)
    at = next(e.seq for e in origin if e.kind == "turn_finished") + 1
    srv.reset()
    with _agent(srv, home, prefix="f") as agent:
        made = fork_session(agent, origin_id, at=at, model="m2")
    assert made.continued is None and srv.requests == []
    with made.agent as forked:
        srv.script(Reply.text("another second turn"))
        assert forked.chat("two, again") == "another second turn"
    assert srv.requests[-1]["model"] == "m2"
    assert replay(home / "sessions", made.session_id).identical


def test_a_fork_of_a_fork_replays(srv, tmp_path):
    home = tmp_path / "home"
    origin_id = _record(srv, home)
    origin = _log(home, origin_id)
    first_at = next(e.seq for e in origin if e.kind == "model_requested")
    srv.reset()
    srv.script(*_replies_after(origin, first_at))
    first = fork_session(_agent(srv, home, prefix="a"), origin_id, at=first_at, model="m2")
    first.agent.close()
    first_log = _log(home, first.session_id)
    second_at = next(e.seq for e in first_log if e.kind == "tool_ran") + 1
    srv.reset()
    srv.script(Reply.text("second fork's answer"))
    second = fork_session(_agent(srv, home, prefix="b"), first.session_id, at=second_at,
                          model="m3")
    second.agent.close()
    assert second.continued is not None
    assert second.continued.final_response == "second fork's answer"
    assert [r["model"] for r in srv.requests] == ["m3"]
    assert replay(home / "sessions", second.session_id).identical


def test_bad_forks_are_usage_errors_and_leave_nothing(srv, tmp_path):
    home = tmp_path / "home"
    origin_id = _record(srv, home)
    count = len(_log(home, origin_id))
    agent = _agent(srv, home, prefix="bad")
    for at, message in ((0, "out of range"), (count + 1, "out of range"),
                        (-3, "out of range"), ("3", "whole number"), (True, "whole number")):
        with pytest.raises(UsageError, match=message):
            fork_session(agent, origin_id, at=at)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="no session 'nope'"):
        agent.fork("nope", at=1)
    with pytest.raises(UsageError, match="unknown settings: colour"):
        agent.fork(origin_id, at=2, colour="red")
    with pytest.raises(UsageError, match="max_tokens"):
        agent.fork(origin_id, at=2, max_tokens=0)
    with pytest.raises(UsageError, match="api_mode"):
        agent.fork(origin_id, at=2, api_mode="telepathy")
    assert sorted(p.stem for p in (home / "sessions").glob("*.jsonl")) == [origin_id]


def test_a_prefix_that_no_longer_replays_fails_and_leaves_no_fork(srv, tmp_path):
    home = tmp_path / "home"
    origin_id = _record(srv, home)
    path = session_path(home / "sessions", origin_id)
    origin = _log(home, origin_id)
    requested = next(e for e in origin if e.kind == "model_requested")
    # Rewrite the logged decision (and re-chain the log) as an older rule would have made it.
    from effects.eventlog.store import SessionLog
    path.unlink()
    with SessionLog.open(home / "sessions", origin_id, durability="flush") as log:
        for e in origin:
            payload = e.payload
            if e.seq == requested.seq:
                payload = {**payload, "message_count": payload["message_count"] + 5}
            log.append(e.kind, e.schema_version, payload, e.recorded_at)
    with pytest.raises(ReplayDivergenceError) as caught:
        fork_session(_agent(srv, home, prefix="x"), origin_id, at=len(origin))
    assert caught.value.seq == requested.seq and caught.value.stage == "request"
    assert sorted(p.stem for p in (home / "sessions").glob("*.jsonl")) == [origin_id]
