"""A log that ends inside a batch of tool results (hypothesis found it): the results it holds
count as replayed, and the tail is reported as unfinished."""

from __future__ import annotations

from pathlib import Path

from pipeline.shell.replay import replay
from tests.pipeline.test_replay_properties import rewrite, run_live
from tests.strategies.scripts import CallStep, ReplyStep, SessionScript, TurnScript


def test_a_log_cut_inside_a_tool_batch_counts_what_it_holds(tmp_path: Path) -> None:
    calls = (CallStep(name="read", arguments='{"path": "a"}'),
             CallStep(name="read", arguments='{"path": "b"}'))
    script = SessionScript(max_turns=2, turns=(TurnScript(
        user="read both", steps=(ReplyStep(content=None, calls=calls, reasoning=None),)),))
    live = run_live(tmp_path, script, None)
    kinds = [e.kind for e in live.envelopes]
    first_result = kinds.index("tool_ran")
    assert kinds[first_result + 1] == "tool_ran"
    cut = first_result + 1  # the first result of the batch is logged, the second is not
    rewrite(live.root, live.session_id, live.envelopes[:cut])
    report = replay(live.root, live.session_id)
    assert report.identical and report.unfinished_tail
    assert report.events == cut
