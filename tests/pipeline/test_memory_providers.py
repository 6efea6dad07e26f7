"""Memory providers: one external provider at most, prefetch failures isolated, syncs in turn
order, and recall over past sessions fenced onto the user's message, recorded and replayed."""

from __future__ import annotations

import threading

import pytest

from pipeline.agent import Agent
from pipeline.memory_providers import BuiltinMemory, MemoryManager, MemoryProvider
from pipeline.session_search import SessionSearch
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel
from stages.errors import UsageError
from stages.log.events import MemoryPrefetched
from stages.prompt.memory import MEMORY_FENCE_CLOSE, MEMORY_FENCE_OPEN, MEMORY_NOTE


class Recorder(MemoryProvider):
    def __init__(self, name: str = "recorder", answer: str = "") -> None:
        self.name = name
        self.answer = answer
        self.synced: list[tuple[str, str]] = []

    def prefetch(self, query: str, *, session_id: str) -> str:
        return self.answer

    def sync_turn(self, user: str, assistant: str, *, session_id: str) -> None:
        self.synced.append((user, assistant))


class Broken(MemoryProvider):
    name = "broken"

    def prefetch(self, query: str, *, session_id: str) -> str:
        raise RuntimeError("backend down")


class Stuck(MemoryProvider):
    name = "stuck"

    def __init__(self) -> None:
        self.release = threading.Event()

    def prefetch(self, query: str, *, session_id: str) -> str:
        self.release.wait()
        return "too late"


def test_a_second_external_provider_is_refused() -> None:
    manager = MemoryManager(BuiltinMemory("/tmp/home"), Recorder("one"))
    with pytest.raises(UsageError, match="only one can be active"):
        manager.add(Recorder("two"))
    assert [p.name for p in manager.providers] == ["builtin", "one"]


def test_prefetch_failures_and_timeouts_are_isolated() -> None:
    stuck = Stuck()
    try:
        manager = MemoryManager(Broken(), stuck, prefetch_timeout=0.05)
        assert manager.prefetch_all("q", session_id="s") == MemoryPrefetched(
            failed=("broken", "stuck"))
    finally:
        stuck.release.set()
    good = MemoryManager(Recorder("a", answer=" fact "), None)
    assert good.prefetch_all("q", session_id="s").results == (("a", "fact"),)
    assert good.prefetch_all("   ", session_id="s") == MemoryPrefetched()


def test_syncs_keep_turn_order_and_shutdown_drains_them() -> None:
    recorder = Recorder()
    manager = MemoryManager(None, recorder)
    for index in range(50):
        manager.sync_all(f"u{index}", f"a{index}", session_id="s")
    manager.shutdown("s")
    assert recorder.synced == [(f"u{i}", f"a{i}") for i in range(50)]


def test_a_provider_added_or_replaced_after_a_sync_gets_the_next_ones() -> None:
    manager = MemoryManager(BuiltinMemory("/tmp/home"), None)
    manager.sync_all("u0", "a0", session_id="s")  # the built-in store syncs nothing
    external = Recorder("external")
    manager.add(external)
    manager.sync_all("u1", "a1", session_id="s")
    builtin = Recorder("builtin")
    manager.builtin = builtin
    manager.sync_all("u2", "a2", session_id="s")
    manager.shutdown("s")
    assert external.synced == [("u1", "a1"), ("u2", "a2")]
    assert builtin.synced == [("u2", "a2")]


def test_recall_over_past_sessions_rides_on_the_user_message_and_replays(tmp_path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir()
    model = ScriptedModel("We moved the orders table with a zero-downtime Postgres migration.",
                          "As before: a zero-downtime migration.", "Anything else?")
    kw = dict(client=model, home=home, cwd=repo, clock=FakeClock(), ids=CountingIds())
    with Agent(**kw) as agent:
        agent.run("How should we run the Postgres migration of the orders table?")
    search = SessionSearch(home)
    with Agent(memory_provider=search, **kw) as agent:
        first = agent.run("Remind me how the orders migration went")
        agent.run("thanks")
        sid = agent.session_id
    recalled = model.requests[1].messages[-1].content
    assert recalled.startswith("Remind me how the orders migration went\n\n" + MEMORY_FENCE_OPEN
                               + "\n" + MEMORY_NOTE + "\nFrom earlier sessions:\n- [")
    assert "zero-downtime Postgres migration" in recalled and recalled.endswith(MEMORY_FENCE_CLOSE)
    assert first.messages[0].content == "Remind me how the orders migration went"  # not kept
    assert "session_search" in [t.name for t in model.requests[1].tools]
    assert model.requests[2].system_prompt == model.requests[1].system_prompt
    model.assert_complete()
    for log in (home / "sessions").glob("*.jsonl"):
        if log.stem != sid:
            log.unlink()  # the recall comes from the log, not from searching again
    assert replay(home / "sessions", sid).identical
