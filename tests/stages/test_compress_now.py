"""The compression the user asks for between turns: named examples of ``decide_requested``,
and a property of the whole machine (``run_compression``): it compacts when the stage says
there is something to compact, keeps the history well-formed, and otherwise records only the
request."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from stages.decision import NOTHING, ReadClock, RequestCompression, Summarise
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.messages import Message
from stages.log.state import State
from stages.session.compress_now import MANUAL, decide_requested, run_compression
from stages.turn import machine
from tests.stages.helpers import SETTINGS, answered, reply, session, then, turn

PROTECT = attrs.evolve(SETTINGS, context_length=64_000, protect_last_n=2)


def _history(exchanges: int, size: int = 400) -> tuple[Message, ...]:
    out: list[Message] = []
    for n in range(exchanges):
        out += [Message(role="user", content=f"q{n} " + "q" * size),
                Message(role="assistant", content=f"a{n} " + "a" * size)]
    return tuple(out)


def _between_turns(exchanges: int, settings: ev.SessionSettings = PROTECT,
                   size: int = 400) -> State:
    state = then(session(settings=settings), ev.HistoryLoaded(messages=_history(exchanges, size)))
    state = answered(turn(state, "last question"), reply("last answer"))
    return then(state, ev.TurnFinished(exit_reason="text_response",
                                       final_response="last answer", completed=True))


def test_a_long_enough_history_is_put_under_manual_pressure() -> None:
    state = _between_turns(4)
    decision = decide_requested(state, config=PROTECT)
    [pressure] = decision.events
    assert isinstance(pressure, ev.ContextPressure) and pressure.reason == MANUAL
    assert pressure.window == 64_000 and pressure.threshold_tokens == 0
    assert decision.next is None


def test_nothing_to_compact_or_no_compression_asks_for_nothing() -> None:
    assert decide_requested(session(settings=PROTECT), config=PROTECT) is NOTHING  # no turn
    assert decide_requested(_between_turns(0), config=PROTECT) is NOTHING  # one exchange
    off = attrs.evolve(PROTECT, compression_enabled=False)
    assert decide_requested(_between_turns(4, off), config=off) is NOTHING
    old = attrs.evolve(PROTECT, rules=2)
    assert decide_requested(_between_turns(4, old), config=old) is NOTHING
    running = turn(_between_turns(4), "another", index=1)  # a turn is still running
    assert decide_requested(running, config=PROTECT) is NOTHING


def test_asking_lifts_a_summary_cooldown_so_the_middle_is_summarised() -> None:
    state = _between_turns(4)
    # As after a failed summary (built directly: the path there is tested with compression).
    cooling = attrs.evolve(state, context=attrs.evolve(state.context, cooldown_until=5000.0))
    kinds, after = _drive(cooling)
    assert "context_summarised" in kinds
    assert after.context.cooldown_until is None
    assert any("compacted" in (m.content or "") for m in after.messages)


def _serve(ask: machine.Perform) -> tuple[ev.Event, ...]:
    if isinstance(ask.effect, RequestCompression):
        return (ev.CompressionRequested(requested_at="t2"),)
    if isinstance(ask.effect, ReadClock):
        return (ev.ClockRead(epoch=1000.0),)
    assert isinstance(ask.effect, Summarise)
    return (ev.ContextSummarised(text="## Goal\nchat\n## Done\n- compacted", model="m",
                                 usage=ev.Usage(), latency_ms=1.0),)


def _drive(state: State) -> tuple[list[str], State]:
    kinds: list[str] = []
    flow = run_compression()
    ask = next(flow)
    while True:
        events = ask.events if isinstance(ask, machine.Record) else _serve(ask)
        kinds += [e.kind for e in events]
        state = then(state, *events)
        try:
            ask = flow.send(state)
        except StopIteration:
            return kinds, state


@given(st.integers(min_value=0, max_value=8), st.integers(min_value=1, max_value=600))
def test_a_requested_compression_compacts_or_records_only_the_request(exchanges, size) -> None:
    state = _between_turns(exchanges, size=size)
    wanted = bool(decide_requested(state, config=PROTECT).events)
    kinds, after = _drive(state)
    if not wanted:
        assert kinds == ["compression_requested"] and after.messages == state.messages
        return
    assert kinds[:2] == ["compression_requested", "context_pressure"]
    assert kinds[-1] == "context_compressed"
    assert violations(after.messages) == []
    # The middle is replaced by the summary (smaller or not: a tiny middle is the engine's
    # call, and its ineffective-compression rule covers it).
    assert len(after.messages) < len(state.messages)
    assert any("compacted" in (m.content or "") for m in after.messages)
    assert after.context.pressure is None and after.context.split_pending == "compression"
    assert after.messages[-1].content == "last answer"  # the last exchange is kept whole
