"""A served session on its own (no HTTP): its turns and interrupts."""

from __future__ import annotations

import pytest

from pipeline.agent import Agent
from pipeline.serve.logged import SessionLogs
from pipeline.serve.openai_compat import ApiError
from pipeline.serve.sessions import ServedSession
from pipeline.testing import CountingIds, FakeClock, ScriptedModel


class LateInterrupt(Agent):
    """An interrupt that arrives just after the turn's end, before the gateway knows it."""

    def run(self, *args, **kwargs):
        result = super().run(*args, **kwargs)
        self.interrupt()
        return result


def _served(agent: Agent) -> ServedSession:
    session_id, logs = agent.open(), SessionLogs(agent.home / "sessions")
    return ServedSession(session_id, "alice", "gateway", agent, logs.describe(session_id), logs)


def test_an_interrupt_that_comes_as_a_turn_ends_does_not_stop_the_next(tmp_path):
    model = ScriptedModel("first", "second")
    agent = LateInterrupt(client=model, home=tmp_path, clock=FakeClock(), ids=CountingIds())
    session = _served(agent)
    assert session.run("one").final_response == "first"
    second = session.run("two")
    assert second.completed and second.final_response == "second"
    assert session.interrupt() is False and not agent.interrupt_requested
    model.assert_complete()
    agent.close()


def test_a_request_that_found_the_session_before_it_was_closed_cannot_run_a_turn_in_it(
        tmp_path):
    """The pool closes an idle session to make room (or DELETE closes it) between a request's
    lookup and its claim: the request is refused, not run on a closed log (a 500)."""
    agent = Agent(client=ScriptedModel(), home=tmp_path, clock=FakeClock(), ids=CountingIds())
    session = _served(agent)
    with session.claimed():
        session.close()
    with pytest.raises(ApiError) as refused:
        session.claim()
    assert (refused.value.status, refused.value.code) == (409, "session_closed")
    assert not session.busy


def test_a_client_that_left_before_its_turn_started_means_it_never_starts(tmp_path):
    """Even when a worker had already taken the turn (too late to drop it from the queue)."""
    model = ScriptedModel("answered")
    agent = Agent(client=model, home=tmp_path, clock=FakeClock(), ids=CountingIds())
    session = _served(agent)
    with session.claimed():
        session.leave(session.claims)
        with pytest.raises(ApiError) as gone:
            session.run("never")
    assert (gone.value.status, gone.value.code) == (499, "client_closed_request")
    assert session.turns == 0 and not agent.interrupt_requested
    with session.claimed():  # the next request's turn runs
        assert session.run("asked").final_response == "answered"
    model.assert_complete()
    agent.close()


def test_a_client_of_an_earlier_claim_that_leaves_stops_nothing(tmp_path):
    """A stream whose turn ended, its client leaving as another request's turn starts."""
    model = ScriptedModel("first", "second")
    agent = Agent(client=model, home=tmp_path, clock=FakeClock(), ids=CountingIds())
    session = _served(agent)
    with session.claimed():
        earlier = session.claims
        session.run("one")
    with session.claimed():
        session.leave(earlier)
        second = session.run("two")
    assert second.completed and second.final_response == "second"
    model.assert_complete()
    agent.close()
