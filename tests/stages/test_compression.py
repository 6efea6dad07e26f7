"""Named examples for context management's pure parts: the window table, the planner's
boundaries and budgets, the summary's prompt and update, the compression stage's outcomes
(summary, failure and cooldown, switched off when it stops paying), the overflow recovery,
and the replies that end a turn too early."""

from __future__ import annotations

import attrs

from stages.context.apply import compacted
from stages.context.compression import DISABLED_NOTICE, decide_compressed, decide_compression
from stages.context.compression_plan import Budgets, boundaries, cut_text
from stages.context.summary import merge_done, serialise
from stages.decision import NOTHING, Finish, PrepareCall, Summarise
from stages.fold import fold
from stages.log import events as ev
from stages.log.context_window import DEFAULT_CONTEXT_WINDOW, resolve_window, table_window
from stages.log.messages import Message
from stages.recovery.chain import decide_recovery
from stages.turn.step import EMPTY_PROMPT, decide_answer, decide_continuation, length_prompt
from tests.stages.helpers import SETTINGS, answered, call, ran, reply, session, spec, then, turn

SMALL = attrs.evolve(SETTINGS, context_length=2048, max_turns=50)


def _user(text: str) -> Message:
    return Message(role="user", content=text)


def _assistant(text: str | None, *calls) -> Message:
    return Message(role="assistant", content=text, tool_calls=calls)


def _tool(call_id: str, text: str) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name="read")


def _chat(turns: int, size: int = 400) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += [_user(f"q{n} " + "q" * size), _assistant(f"a{n} " + "a" * size)]
    return out


# --- windows -----------------------------------------------------------------------------------

def test_the_table_knows_models_by_their_longest_matching_name() -> None:
    assert table_window("gpt-4o-mini-2024") == table_window("gpt-4o")
    assert table_window("gpt-4o").tokens == 128_000 and table_window("gpt-4").tokens == 8_192
    assert table_window("claude-sonnet-4-5").source == "table:claude"
    assert table_window("my-own-model") .tokens == DEFAULT_CONTEXT_WINDOW


def test_config_beats_the_provider_which_beats_the_table() -> None:
    probe = ev.ContextWindowProbed(provider="local", model="qwen", tokens=4096,
                                   source="provider:/props")
    assert resolve_window("qwen", "local", configured=None, probed=(probe,)).tokens == 4096
    assert resolve_window("qwen", "local", configured=2048, probed=(probe,)).source == "config"
    assert resolve_window("qwen", "other", configured=None, probed=(probe,)).tokens == 131_072


# --- the planner -------------------------------------------------------------------------------

def test_budgets_scale_with_the_window() -> None:
    small, large = Budgets(window=2048), Budgets(window=1_000_000)
    assert small.tail == 409 and large.tail == 20_000
    assert small.head == 204 and large.head == 4_000
    # max(2000, min(0.20 * content, 12000)), capped at a tenth of the window
    assert large.summary(5_000) == 2_000 and large.summary(30_000) == 6_000
    assert large.summary(100_000) == 12_000 and small.summary(100_000) == 204


def test_the_head_the_middle_and_the_tail() -> None:
    messages = _chat(10)
    b = boundaries(messages, window=2048, protect_last_n=20)
    assert b.head == 1  # the opening question; its answer does not fit the head's budget
    # The tail's budget (a fifth of the window) holds the last three messages, which hold the
    # latest user message.
    assert b.tail_start == b.protected_from == 17
    big = boundaries(messages, window=1_000_000, protect_last_n=4)
    assert big.head == 2 and big.tail_start == 16  # the last four messages


def test_the_tail_never_splits_a_call_from_its_results() -> None:
    c1, c2 = call("c1", "read"), call("c2", "read")
    messages = [*_chat(3), _user("do it"), _assistant(None, c1, c2), _tool("c1", "x" * 300),
                _tool("c2", "y" * 300), _assistant("done")]
    b = boundaries(messages, window=2048, protect_last_n=2)
    assert messages[b.protected_from].role != "tool"
    assert b.tail_start <= 6  # the latest user message stays


def test_a_tool_result_larger_than_the_window_is_cut_with_a_marker() -> None:
    text = "x" * 50_000
    cut = cut_text(text, 2048)
    assert len(cut) <= 2048 and "larger than the context window allows" in cut
    assert cut.startswith("x" * 1000) and cut.endswith("x" * 400)


def test_the_summary_joins_a_neighbour_when_no_role_fits_between_them() -> None:
    messages = [_user("first"), _assistant("mid"), _user("mid2"), _assistant("last answer")]
    plan = ev.CompressionPlanned(reason="preflight", estimated_tokens=0, window=100,
                                 message_count=4, head=1, tail_start=3)
    new = compacted(messages, plan, "SUMMARY")
    assert [m.role for m in new] == ["user", "assistant"]
    assert new[0].content == "first\n\nSUMMARY"


# --- the summary -------------------------------------------------------------------------------

def test_each_message_is_cut_at_6000_chars_for_the_summariser() -> None:
    (line,) = serialise([_user("u" * 20_000)])
    assert len(line) < 6_000 + 100 and "...[truncated]..." in line


def test_an_update_keeps_every_done_item() -> None:
    previous = "## Done\n- 1. wrote a.py\n- 2. ran the tests\n## In Progress\n- fix b.py"
    written = "## Done\n- fix b.py\n## In Progress\n- nothing"
    merged = merge_done(previous, written)
    assert "wrote a.py" in merged and "ran the tests" in merged and "fix b.py" in merged
    assert merged.index("wrote a.py") < merged.index("## In Progress")


# --- the stage ---------------------------------------------------------------------------------

def _pressured(settings: ev.SessionSettings = SMALL, turns: int = 6):
    state = session(settings=settings)
    for n in range(turns):
        state = turn(state, f"q{n} " + "q" * 400, index=n)
        state = answered(state, reply(f"a{n} " + "a" * 400))
        state = then(state, ev.TurnFinished(exit_reason="x", final_response="a",
                                            completed=True))
    state = turn(state, "latest question", index=99)
    return then(state, ev.ContextPressure(estimated_tokens=0, threshold_tokens=0,
                                          reason="preflight"), ev.ClockRead(epoch=1000.0))


def test_pressure_plans_and_asks_for_a_summary_that_fits_its_window() -> None:
    state = _pressured()
    decision = decide_compression(state, config=SMALL)
    (plan,) = decision.events
    assert isinstance(plan, ev.CompressionPlanned) and plan.summarise and plan.at == 1000.0
    assert isinstance(decision.next, Summarise)
    request = decision.next.request
    assert request.purpose == "compression" and request.tools == ()
    sent = len(request.messages[0].content or "") // 4
    assert sent + (request.max_tokens or 0) <= 2048


def test_a_summary_replaces_the_middle_and_the_latest_message_stays() -> None:
    state = _pressured()
    decision = decide_compression(state, config=SMALL)
    state = then(state, decision, ev.ContextSummarised(text="## Done\n- all", model="m"))
    (done,) = decide_compressed(state, config=SMALL).events
    assert done.cooldown_until is None and done.summary == "## Done\n- all"
    after = then(state, done)
    assert after.messages[-1].content == "latest question"
    assert after.history_chars < state.history_chars
    assert after.context.compressions == 1 and after.context.pressure is None


def test_the_turn_still_starts_at_its_user_message_after_a_compression() -> None:
    """A compression inside a turn moves the turn's messages: the recalled memory still rides
    on the turn's own message (it raised IndexError, or went to another message, before)."""
    from stages.prompt.memory import with_recall
    for inserted in ("## Done\n- all", None):
        state = _pressured()
        state = then(state, decide_compression(state, config=SMALL),
                     ev.ContextSummarised(text="## Done\n- all", model="m") if inserted else
                     ev.SummaryFailed(error_type="ProviderHTTPError", message="503"))
        after = then(state, decide_compressed(state, config=SMALL))
        assert len(after.messages) < state.turn.first_message
        assert after.messages[after.turn.first_message].content == "latest question"
        sent = with_recall(after, "<memory>recalled</memory>")
        assert sent[after.turn.first_message].content == (
            "latest question\n\n<memory>recalled</memory>")


def test_a_failed_summary_drops_the_middle_and_cools_down_600_seconds() -> None:
    state = _pressured()
    state = then(state, decide_compression(state, config=SMALL),
                 ev.SummaryFailed(error_type="ProviderHTTPError", message="503"))
    (done,) = decide_compressed(state, config=SMALL).events
    assert done.cooldown_until == 1600.0 and "dropped" in (done.inserted or "")
    later = then(then(state, done), ev.ContextPressure(estimated_tokens=0, threshold_tokens=0),
                 ev.ClockRead(epoch=1500.0))
    later = then(later, ev.TurnFinished(exit_reason="x", final_response="a", completed=True))
    later = turn(later, "more " + "m" * 900, index=100)
    later = then(later, ev.ContextPressure(estimated_tokens=0, threshold_tokens=0))
    (plan,) = decide_compression(later, config=SMALL).events
    assert not plan.summarise  # still cooling down: no summary call


def test_two_compressions_in_a_row_saving_under_10_percent_switch_it_off() -> None:
    state = _pressured()
    disabled = None
    for _ in range(2):
        state = then(state, ev.ContextPressure(estimated_tokens=0, threshold_tokens=0))
        plan = ev.CompressionPlanned(reason="preflight", estimated_tokens=0, window=2048,
                                     message_count=len(state.messages), head=0, tail_start=0,
                                     summarise=False)
        state = then(state, plan)
        (done,) = decide_compressed(state, config=SMALL).events
        state = then(state, done)
        disabled = done
    assert disabled is not None and disabled.disabled and disabled.notice == DISABLED_NOTICE
    assert decide_compression(then(state, ev.ContextPressure(
        estimated_tokens=0, threshold_tokens=0)), config=SMALL) == NOTHING


# --- recovery ----------------------------------------------------------------------------------

def _overflowed(state):
    return then(state, ev.ModelRequested(call_index=0, purpose="step", model="m", provider="p",
                                         message_count=1, tool_count=0, estimated_tokens=0),
                ev.ModelFailed(error_type="ProviderHTTPError", status=400,
                               message="maximum context length is 1024 tokens"))


def test_an_overflow_compresses_and_retries_once() -> None:
    state = _overflowed(_pressured())
    decision = decide_recovery(state, config=SMALL)
    (decided,) = decision.events
    assert decided.action == "compress" and decision.next == PrepareCall()
    state = then(state, decision)
    assert state.context.pressure == "overflow" and state.context.window_cap == 1024
    again = _overflowed(state)
    assert decide_recovery(again, config=SMALL).events == ()  # the turn fails


# --- replies that end too early ----------------------------------------------------------------

def test_a_reply_cut_at_the_output_limit_is_continued_and_joined() -> None:
    state = turn(session(settings=SMALL), "write a poem")
    state = answered(state, reply("Roses are", finish_reason="length"))
    decision = decide_continuation(state, config=SMALL)
    assert decision.events[0].why == "length" and decision.events[0].prompt == length_prompt(SMALL)
    state = answered(then(state, decision), reply(" red.", finish_reason="stop"))
    (finished,) = decide_answer(state, config=SMALL).events
    assert finished.completed and finished.final_response == "Roses are red."


def test_an_empty_reply_is_asked_again_once_then_reported() -> None:
    state = answered(turn(session(settings=SMALL), "hi"), reply(""))
    first = decide_continuation(state, config=SMALL)
    assert first.events[0].prompt == EMPTY_PROMPT and first.next == PrepareCall()
    state = answered(then(state, first), reply(""))
    (finished,) = decide_continuation(state, config=SMALL).events
    assert finished.exit_reason == "empty_response" and finished.failed
    assert not finished.completed


def test_a_content_filter_stop_ends_the_turn_as_not_completed() -> None:
    state = answered(turn(session(settings=SMALL), "hi"),
                     reply("I can't", finish_reason="content_filter"))
    decision = decide_answer(state, config=SMALL)
    (finished,) = decision.events
    assert isinstance(decision.next, Finish)
    assert finished.exit_reason == "content_filter" and not finished.completed
    assert "content filter" in (finished.error or "")


def test_a_tool_batch_past_the_threshold_compresses_before_the_next_call() -> None:
    from stages.context.preflight import decide_preflight
    settings = attrs.evolve(SMALL, context_length=4096)
    state = turn(session(spec("read"), settings=settings), "read it")
    c = call("c1", "read")
    state = answered(state, reply(None, c))
    state = then(state, ev.ToolsPlanned(call_ids=("c1",), concurrent=False),
                 ran(c, "x" * 12_000))
    (pressure,) = decide_preflight(state, config=settings).events
    assert pressure.reason == "tool_batch"


def test_a_fallback_provider_may_name_its_own_window() -> None:
    from stages.log.context_window import session_window
    settings = attrs.evolve(SMALL, fallback_providers=(
        ev.ProviderEntry(provider="q", model="tiny", context_length=1024),
        ev.ProviderEntry(provider="q", model="gpt-4o")))
    assert session_window(settings, (), 0).tokens == 2048
    assert session_window(settings, (), 1).tokens == 1024
    assert session_window(settings, (), 2).source == "table:gpt-4o"


def test_a_child_session_keeps_what_its_parent_settled() -> None:
    """Session approvals and the directories checked for hints survive the split into a child:
    the person is not asked again, and no hint file is read twice."""
    settings = ev.SessionSettings(model="m", provider="p")
    state = fold([
        ev.SessionStarted(session_id="child", started_at="t", parent_session_id="parent",
                          settings=settings),
        ev.ContextInherited(parent_session_id="parent", reason="compression", messages=(),
                            approved_patterns=("recursive delete",), hint_dirs=("src",)),
    ])
    assert state.approved_patterns == ("recursive delete",)
    assert state.hint_dirs == frozenset({"src"})
