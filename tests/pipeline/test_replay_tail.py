"""A log that ends inside a batch of tool results (hypothesis found it): the results it holds
count as replayed, and the tail is reported as unfinished; a session resumed there replays."""

from __future__ import annotations

from pathlib import Path

from pipeline.shell.replay import replay
from effects.eventlog.store import read_envelopes, session_path
from tests.pipeline.test_replay_properties import (
    CountingClock,
    CountingIds,
    ScriptedModel,
    _agent,
    rewrite,
    run_live,
)
from tests.strategies.scripts import CallStep, ReplyStep, SessionScript, TurnScript

CALLS = (CallStep(name="read", arguments='{"path": "a"}'),
         CallStep(name="read", arguments='{"path": "b"}'))
SCRIPT = SessionScript(max_turns=2, turns=(TurnScript(
    user="read both", steps=(ReplyStep(content=None, calls=CALLS, reasoning=None),)),))


def test_a_log_cut_inside_a_tool_batch_counts_what_it_holds(tmp_path: Path) -> None:
    live = run_live(tmp_path, SCRIPT, None)
    kinds = [e.kind for e in live.envelopes]
    first_result = kinds.index("tool_ran")
    assert kinds[first_result + 1] == "tool_ran"
    cut = first_result + 1  # the first result of the batch is logged, the second is not
    rewrite(live.root, live.session_id, live.envelopes[:cut])
    report = replay(live.root, live.session_id)
    assert report.identical and report.unfinished_tail
    assert report.events == cut


def test_a_session_resumed_inside_a_tool_batch_replays(tmp_path: Path) -> None:
    """The process died between the two results of one batch; a new one resumed the session
    and went on. The replay folds the result the log holds, then cuts the turn where the resume
    closed it (it failed before: the batch was cut before that result, which the replay then
    read where it expected the next command)."""
    live = run_live(tmp_path, SCRIPT, None)
    cut = [e.kind for e in live.envelopes].index("tool_ran") + 1
    rewrite(live.root, live.session_id, live.envelopes[:cut])
    model = ScriptedModel(interrupt=lambda: None)
    model.expect([ReplyStep(content="ok")])
    agent = _agent(tmp_path, SCRIPT, model, CountingClock(), CountingIds(),
                   session_id=live.session_id)
    assert agent.run_conversation("are you there?")["completed"]
    agent.close()
    kinds = [e.kind for e in read_envelopes(session_path(live.root, live.session_id))]
    assert kinds[cut - 1:cut + 1] == ["tool_ran", "session_resumed"]
    assert replay(live.root, live.session_id).identical
