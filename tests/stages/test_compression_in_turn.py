"""Compression that keeps going inside one turn (rules 7): the latest user message is kept apart
from the middle, the calls after it are summarised again and again, and the summary is updated
in place. The long turns run through the real session machine against a scripted model that
refuses a request over its window (``tests.strategies.long_turn``)."""

from __future__ import annotations

import re

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stages.context.apply import compacted, moved
from stages.context.compression import SUMMARY_ROOM
from stages.context.compression_plan import SUMMARY_PREFIX, boundaries
from stages.context.summary import bounded, summary_text, without_compaction
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.context_tokens import CHARS_PER_TOKEN
from stages.log.messages import Message, ToolCall
from tests.strategies.long_turn import FINAL, long_turn, run_long_turn
from tests.strategies.simulation import Driver, check_pairs

USER = "do the long task 7f3a"


def _events(driver: Driver) -> list[ev.Event]:
    return [e for log in driver.logs for e in log]


def _count(events: list[ev.Event], kind: type) -> int:
    return sum(isinstance(e, kind) for e in events)


# --- the named scenario ----------------------------------------------------------------------

def test_a_300_call_turn_on_a_4000_token_window_completes() -> None:
    """Measured before: the first summary joined the turn's own message, which then counted
    as a summary and as the kept latest message; 7 compressions, 1 summary, and the turn
    failed at call 29 with nothing left to compress (the model refused the request)."""
    driver, play = run_long_turn(long_turn(300, window=4_000, user=USER))
    events = _events(driver)
    (finished,) = [e for e in events if isinstance(e, ev.TurnFinished)]
    assert finished.completed and finished.final_response == FINAL, finished
    assert _count(events, ev.ToolRan) == 300 and play.refused == 0
    compressions = _count(events, ev.ContextCompressed)
    assert compressions >= 30
    # Every compression summarised, each an update of the one before.
    assert _count(events, ev.ContextSummarised) == compressions
    summary = driver.state.context.summary or ""
    assert re.search(r"steps up to 29\d", summary), summary
    # Every Done item kept, the oldest counted in one line so that the summary stays bounded.
    done = _done(summary)
    assert _folded(done) + len(done) - 1 == compressions
    assert len(summary) <= 400 * CHARS_PER_TOKEN * SUMMARY_ROOM
    assert play.largest <= 4_000


# --- named examples of the planner and of the application -------------------------------------

def _user(text: str) -> Message:
    return Message(role="user", content=text)


def _calls(first: int, count: int, size: int = 400) -> list[Message]:
    out: list[Message] = []
    for n in range(first, first + count):
        call = ToolCall(id=f"c{n}", name="read", arguments="{}")
        out += [Message(role="assistant", content=f"step {n}", tool_calls=(call,)),
                Message(role="tool", content="r" * size, tool_call_id=call.id, name="read")]
    return out


def _plan(messages: list[Message], window: int = 4_000) -> ev.CompressionPlanned:
    b = boundaries(messages, window=window, protect_last_n=20, keep_user=True)
    return ev.CompressionPlanned(reason="preflight", estimated_tokens=0, window=window,
                                 message_count=len(messages), head=b.head,
                                 tail_start=b.tail_start, kept=b.kept, iterative=True)


def test_the_calls_after_the_latest_user_message_are_summarised_and_it_stays() -> None:
    messages = [_user(USER), *_calls(0, 20)]
    plan = _plan(messages)
    assert plan.head == 1 and plan.kept is None and plan.tail_start > 20
    first = compacted(messages, plan, summary_text("S1"))
    assert first[0].content == f"{USER}\n\n{summary_text('S1')}"
    # The carrier is the latest user message: kept apart, its summary replaced, not added to.
    longer = [*first, *_calls(20, 20)]
    # Rules 6: the carrier is no head and the tail starts at the latest user message, so
    # nothing is left in the middle.
    stalled = boundaries(longer, window=4_000, protect_last_n=20)
    assert stalled.head == stalled.tail_start == 0
    again = _plan(longer)
    assert (again.head, again.kept) == (0, 0) and again.tail_start > 20
    second = compacted(longer, again, summary_text("S2"))
    assert second[0].content == f"{USER}\n\n{summary_text('S2')}"
    assert sum(SUMMARY_PREFIX in (m.content or "") for m in second) == 1
    assert violations(second) == [] and second[1:] == tuple(longer[again.tail_start:])
    assert moved(0, again, len(longer), len(second)) == 0


def test_after_a_user_head_the_summary_is_a_message_of_its_own() -> None:
    """Between the opening question and the latest user message only an assistant fits."""
    earlier = [_user("first"), *_calls(0, 6), Message(role="assistant", content="ok")]
    messages = [*earlier, _user(USER), *_calls(6, 20)]
    plan = _plan(messages)
    assert plan.head == 1 and plan.kept == len(earlier)
    new = compacted(messages, plan, summary_text("S"))
    assert [m.role for m in new[:4]] == ["user", "assistant", "user", "assistant"]
    assert new[1].content == summary_text("S") and new[2].content == USER
    assert violations(new) == []
    assert new[moved(plan.kept, plan, len(messages), len(new))].content == USER


def test_a_failed_summary_replaces_the_previous_marker_too() -> None:
    carrier = f"{USER}\n\n[12 earlier messages were dropped to fit the context window; no " \
              f"summary of them could be written.]\n{summary_text('S0')}"
    assert without_compaction(carrier) == USER
    assert without_compaction(f"{summary_text('S0')}\n\n{USER}") == USER


def test_the_summary_stays_within_its_room_and_counts_what_it_folded() -> None:
    done = "\n".join(f"- finished item number {n}" for n in range(100))
    summary = f"## Goal\n- g\n## Done\n{done}\n## In Progress\n- now"
    short = bounded(summary, 600)
    assert len(short) <= 600 and "## In Progress\n- now" in short
    assert "finished item number 99" in short and "finished item number 0\n" not in short
    folded = int(re.search(r"\((\d+) earlier finished", short).group(1))
    assert folded + short.count("- finished item number") == 100
    # Folding again adds to the count.
    again = bounded(short.replace("## In Progress", "- one more\n## In Progress"), 600)
    count = int(re.search(r"\((\d+) earlier finished", again).group(1))
    assert count + again.count("- finished item number") + 1 == 101


# --- the property ----------------------------------------------------------------------------

def _done(summary: str) -> list[str]:
    lines, inside = [], False
    for line in summary.splitlines():
        if line.startswith("## "):
            inside = line == "## Done"
        elif inside and line.strip():
            lines.append(line)
    return lines


def _folded(items: list[str]) -> int:
    match = re.match(r"- \((\d+) earlier finished", items[0]) if items else None
    return int(match.group(1)) if match else 0


@attrs.define
class CheckedDriver(Driver):
    """Checks the history after every compression of the turn."""

    previous: str | None = None
    checked: int = 0

    def add(self, event: ev.Event) -> None:
        super().add(event)
        if isinstance(event, ev.ContextCompressed) and self.state.turn is not None:
            self._check(event)

    def _check(self, event: ev.ContextCompressed) -> None:
        messages = self.state.messages
        assert violations(messages) == []
        check_pairs(messages)
        # The latest user message is there exactly once, where the turn says it is.
        assert sum(USER in (m.content or "") for m in messages) == 1
        assert without_compaction(messages[self.state.turn.first_message].content or "") == USER
        carriers = [m.content or "" for m in messages if SUMMARY_PREFIX in (m.content or "")]
        assert len(carriers) <= 1
        summary = event.summary
        if summary is not None:  # the summary in the history is the current one
            assert carriers and summary_text(summary) in carriers[0]
            plan = self.state.context.plan or event
            budget = getattr(plan, "summary_budget", 0)
            if budget and "earlier finished items folded" in summary:
                assert len(summary) <= budget * CHARS_PER_TOKEN * SUMMARY_ROOM
        if summary != self.previous and self.previous is not None and summary is not None:
            # Updated: every finished item of the previous summary is kept or counted.
            old, new = _done(self.previous), _done(summary)
            lost = [item for item in old if item not in new and not item.startswith("- (")]
            assert _folded(new) >= _folded(old) + len(lost), (old, new)
        self.previous = summary
        self.checked += 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replies=st.integers(5, 90), result_chars=st.integers(10, 1_200),
       window=st.sampled_from((1_500, 2_048, 4_000, 8_192)),
       batches=st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple),
       failing=st.lists(st.booleans(), min_size=1, max_size=4).map(tuple),
       history=st.none() | st.lists(st.tuples(st.text(max_size=300), st.text(max_size=300)),
                                    min_size=1, max_size=3).map(tuple))
def test_any_number_of_compressions_in_a_turn_keeps_the_history_sound(
        replies: int, result_chars: int, window: int, batches: tuple[int, ...],
        failing: tuple[bool, ...], history: tuple[tuple[str, str], ...] | None) -> None:
    # A call group (its calls and results, each about ``result_chars`` long) fits in a sixth
    # of the window: the protected tail keeps the last one whole.
    result_chars = min(result_chars, window * CHARS_PER_TOKEN // (12 * max(batches)))
    script = long_turn(replies, result_chars=result_chars, window=window, user=USER,
                       batches=batches, history=history)
    driver, play = run_long_turn(script, failing=failing, driver_type=CheckedDriver)
    assert isinstance(driver, CheckedDriver)
    events = _events(driver)
    # Every compression of the turn was checked, and the turn got to its answer.
    assert driver.checked == _count(events, ev.ContextCompressed)
    (finished,) = [e for e in events if isinstance(e, ev.TurnFinished)]
    assert finished.completed, (finished, play.refused)
