"""One user turn of 300 tool calls on a 4,000-token window, end to end (rules 7), in every API
mode: a real Agent with a real tool against the mode's fake server on loopback, which refuses a
request over its window with the real API's overflow error and writes the summaries the
compressor asks for (``long_turn_scenario``). Told the window, the agent never overflows; not
told, it learns the window from the one refusal (overflow, compress, retry) and goes on. The
turn completes, every compression updates the one summary, the summary stays bounded, and the
session replays byte for byte."""

from __future__ import annotations

import re

import pytest

from pipeline.shell.replay import replay
from stages.fold import fold
from stages.log import events as ev
from stages.log.alternation import violations
from tests.pipeline.long_turn_scenario import MODES, Outcome, run

WINDOW, CALLS = 4_000, 300
# The summary's bound: 1.5 times its budget (a tenth of the window) at four characters a token.
SUMMARY_BOUND = int(WINDOW / 10 * 4 * 1.5)


def _check(outcome: Outcome, home, *, calls: int) -> None:
    result = outcome.result
    assert result["completed"] and result["final_response"] == "read them all", result
    assert outcome.left_over == 0 and outcome.unexpected == []
    assert sum(isinstance(e, ev.ToolRan) for e in outcome.events) == calls
    assert outcome.summaries == len(outcome.compressions)
    # No request ever carried two summaries, and no summary outgrew its bound.
    assert outcome.most_summaries_in_a_request == 1
    assert max(len(c.summary or "") for c in outcome.compressions) <= SUMMARY_BOUND
    assert violations(fold(outcome.events).messages) == []
    report = replay(home / "sessions", result["session_id"])
    assert report.identical, report.describe()


def _check_long(outcome: Outcome) -> None:
    # Each compression updated the one summary: the last one knows the latest files and keeps
    # (or counts) what came before.
    assert len(outcome.compressions) >= 30
    last = outcome.final_summary
    assert re.search(r"read files up to 29\d", last)
    assert "(summary 1)" in last or "earlier finished items folded" in last


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["chat_completions", "codex_responses", "anthropic_messages"])
def test_a_300_call_turn_told_its_window_never_overflows(mode, home) -> None:
    outcome = run(mode, home, window=WINDOW, calls=CALLS, told=True)
    _check(outcome, home, calls=CALLS)
    _check_long(outcome)
    assert outcome.refused == 0 and outcome.largest <= WINDOW


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_300_call_turn_learns_its_window_from_the_refusal(mode, home) -> None:
    outcome = run(mode, home, window=WINDOW, calls=CALLS, told=False)
    _check(outcome, home, calls=CALLS)
    _check_long(outcome)
    # One refusal (the recovery's compression and retry), then the window the refusal named
    # (or a tenth under the failed request) holds; the compressions stay near the told run's.
    assert outcome.refused == 1
    assert sum(isinstance(e, ev.ModelFailed) for e in outcome.events) == 1
    assert [e.action for e in outcome.events if isinstance(e, ev.RecoveryDecided)] == [
        "compress"]
    assert len(outcome.compressions) <= 70


@pytest.mark.parametrize("mode", MODES)
def test_a_short_turn_over_a_small_window_recovers_from_the_refusal(mode, home) -> None:
    outcome = run(mode, home, window=1_200, calls=10, told=False)
    _check(outcome, home, calls=10)
    assert outcome.refused == 1 and len(outcome.compressions) >= 2
