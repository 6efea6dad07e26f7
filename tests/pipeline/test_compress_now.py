"""``Agent.compress``: the user compresses the context between turns (the chat's /compress);
the session goes on in a child and both replay."""

from __future__ import annotations

from pathlib import Path

from effects.images import BlobStore
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds
from stages.log import events as ev
from stages.session.compress_now import MANUAL
from tests.pipeline.test_context import _agent, _events, _turn, summarising

__all__ = ["summarising"]  # the fixture


def test_compress_between_turns_summarises_continues_in_a_child_and_replays(
        summarising, home) -> None:
    # Far from the window, and only the last exchange protected: a middle to summarise.
    with _agent(summarising, home, CountingIds(), context_length=64_000,
                protect_last_n=2) as agent:
        for n in range(4):
            assert _turn(summarising, agent, n)["completed"]
        parent = agent.session_id
        assert summarising.summaries == 0
        assert agent.compress() is True
        child = agent.session_id
        assert child != parent and summarising.summaries == 1
        after = _turn(summarising, agent, 4)
    assert after["completed"]
    events = _events(home, parent)
    requested = [i for i, e in enumerate(events) if isinstance(e, ev.CompressionRequested)]
    assert len(requested) == 1
    pressure, planned = events[requested[0] + 1], events[requested[0] + 3]
    assert isinstance(pressure, ev.ContextPressure) and pressure.reason == MANUAL
    assert isinstance(planned, ev.CompressionPlanned) and planned.reason == MANUAL
    assert isinstance(events[-1], ev.SessionSplit) and events[-1].child_session_id == child
    # The request after the compression carries the summary instead of the middle turns.
    sent = str(summarising.requests[-1]["messages"])
    assert "question 1" not in sent and "question 2" not in sent
    assert "question 0" in sent and "summary 1 written" in sent  # the head stays
    for sid in (parent, child):
        assert replay(home / "sessions", sid).identical


def test_compress_with_nothing_to_compact_records_only_the_request(summarising, home) -> None:
    with _agent(summarising, home, CountingIds(), context_length=64_000) as agent:
        assert agent.compress() is False  # no turn yet
        assert _turn(summarising, agent, 0)["completed"]
        assert agent.compress() is False  # one short exchange: nothing in the middle
        sid = agent.session_id
    kinds = [e.kind for e in _events(home, sid)]
    assert kinds.count("compression_requested") == 2
    assert "context_pressure" not in kinds and "compression_planned" not in kinds
    assert replay(home / "sessions", sid).identical


def test_a_session_and_its_compressed_child_share_the_agents_blob_store(
        summarising, home, monkeypatch) -> None:
    """Each runner's performers made a blob store of their own, the agent's aside."""
    made: list[BlobStore] = []
    in_home = BlobStore.in_home

    def counted(home: Path) -> BlobStore:
        made.append(in_home(home))
        return made[-1]

    monkeypatch.setattr(BlobStore, "in_home", counted)
    with _agent(summarising, home, CountingIds(), context_length=64_000,
                protect_last_n=2) as agent:
        for n in range(4):
            assert _turn(summarising, agent, n)["completed"]
        parent = agent.session_id
        assert agent.compress() is True
        assert agent.session_id != parent
        assert _turn(summarising, agent, 4)["completed"]
    assert len(made) == 1
