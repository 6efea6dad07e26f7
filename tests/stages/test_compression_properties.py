"""Hypothesis properties of compression over generated conversations: the history still
alternates, no tool call is separated from its result, the latest user message survives, the
result is smaller, the summary budget follows its formula, and an update keeps every Done
item. (The turn machine drives compression too, in test_properties' simulation, with windows
from 50 to 5,000 tokens.)"""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.context.apply import compacted
from stages.context.compression_plan import Budgets
from stages.context.engine import MIN_MIDDLE_TOKENS, Compressor
from stages.context.summary import merge_done, summary_text
from stages.fold import fold
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.context_tokens import CHARS_PER_TOKEN
from stages.log.messages import Message, ToolCall
from tests.strategies.simulation import check_pairs

_TEXT = st.integers(0, 3000).map(lambda n: "w" * n)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Closed conversations: user turns, each with tool rounds, ending in an answer (the last
    turn may still wait for its answer)."""
    messages: list[Message] = []
    ids = iter(range(10_000))
    turns = draw(st.integers(1, 12))
    for turn in range(turns):
        messages.append(Message(role="user", content=f"u{turn} {draw(_TEXT)}"))
        last = turn == turns - 1
        for _ in range(draw(st.integers(0, 3))):
            calls = tuple(ToolCall(id=f"c{next(ids)}", name="read", arguments="{}")
                          for _ in range(draw(st.integers(1, 3))))
            messages.append(Message(role="assistant", content=None, tool_calls=calls))
            messages += [Message(role="tool", content=draw(_TEXT), tool_call_id=c.id,
                                 name="read") for c in calls]
        if not last or draw(st.booleans()):
            messages.append(Message(role="assistant", content=f"a{turn} {draw(_TEXT)}"))
    return messages


def _state(messages: list[Message], protect: int) -> tuple[ev.SessionSettings, object]:
    config = ev.SessionSettings(model="m", provider="p", protect_last_n=protect)
    return config, fold([ev.SessionStarted(session_id="s", started_at="t", settings=config),
                         ev.HistoryLoaded(messages=tuple(messages))])


@settings(max_examples=300, deadline=None)
@given(conversations(), st.sampled_from((512, 2048, 8192, 32_768, 1_000_000)),
       st.integers(1, 30), st.booleans())
def test_compression_keeps_the_rules_and_the_latest_user_message(
        messages: list[Message], window: int, protect: int, summarised: bool) -> None:
    assert violations(messages) == []
    config, state = _state(messages, protect)
    plan = Compressor().plan(state, config, reason="preflight", window=window, estimate=0,
                             now=0.0)
    if plan is None:
        return
    text = summary_text("S") if summarised else "[dropped]"
    new = compacted(messages, plan, text)
    assert violations(new) == []
    check_pairs(new)
    latest = next(m.content for m in reversed(messages) if m.role == "user")
    assert any(m.role == "user" and latest in (m.content or "") for m in new)
    # The history shrinks whenever what the summary replaces is larger than the summary; a
    # middle of a few short messages may be smaller than it (found on 'u0', a call, an empty
    # result, 'a0' at a 512-token window), and then the history grows by the difference at most.
    middle = sum(m.chars for i, m in enumerate(messages)
                 if plan.head <= i < plan.tail_start and i != plan.kept)
    before, after = sum(m.chars for m in messages), sum(m.chars for m in new)
    inserted = Message(role="assistant", content=text).chars
    if middle > inserted:
        assert after < before
    assert after <= before - middle + inserted
    # Nothing kept is larger than the window allows.
    limit = Budgets(window=window).tool_result_chars
    assert all(len(m.content or "") <= limit + 200 for m in new[plan.head + 1:]
               if m.role == "tool")


@settings(max_examples=300, deadline=None)
@given(conversations(), st.sampled_from((512, 2048, 8192, 32_768)), st.integers(1, 30),
       st.floats(0, 1))
def test_a_shortest_useful_summary_never_grows_the_history(
        messages: list[Message], window: int, protect: int, share: float) -> None:
    """Rules 9 (``summary_must_shrink``): a middle is summarised only when it is larger than a
    summary message holding the shortest useful summary."""
    config, state = _state(messages, protect)
    plan = Compressor().plan(state, config, reason="preflight", window=window, estimate=0,
                             now=0.0)
    if plan is None or not plan.summarise:
        return
    text = summary_text("s" * int(share * MIN_MIDDLE_TOKENS * CHARS_PER_TOKEN))
    new = compacted(messages, plan, text)
    assert sum(m.chars for m in new) < sum(m.chars for m in messages)


def test_a_middle_smaller_than_its_summary_is_summarised_only_before_rules_9() -> None:
    """Found by hypothesis: the first question, a call with an empty result and a short answer
    on a 512-token window, then a later turn; the summary was longer than the middle."""
    call = ToolCall(id="c0", name="read", arguments="{}")
    messages = [Message(role="user", content="u0"),
                Message(role="assistant", content=None, tool_calls=(call,)),
                Message(role="tool", content="", tool_call_id="c0", name="read"),
                Message(role="assistant", content="a0"),
                Message(role="user", content="u1 " + "w" * 600),
                Message(role="assistant", content="a1 " + "w" * 600)]
    plans = {}
    for version in (8, 9):
        config, state = _state(messages, 2)
        config = attrs.evolve(config, rules=version)
        plans[version] = Compressor().plan(state, config, reason="preflight", window=512,
                                           estimate=0, now=0.0)
    assert plans[8] is not None and plans[8].summarise
    assert plans[9] is None or not plans[9].summarise


@given(st.integers(0, 10**7), st.integers(64, 2_000_000))
def test_the_summary_budget_formula(content_tokens: int, window: int) -> None:
    budget = Budgets(window=window).summary(content_tokens)
    seeds = max(2000, min(int(0.20 * content_tokens), 12000))
    assert budget == max(64, min(seeds, window // 10))
    assert budget <= max(64, window // 10)


_ITEM = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=3, max_size=20)


@given(st.lists(_ITEM, max_size=8, unique=True), st.lists(_ITEM, max_size=8, unique=True),
       st.booleans())
def test_an_update_keeps_every_done_item(done: list[str], written: list[str],
                                         with_section: bool) -> None:
    previous = "## Goal\ng\n## Done\n" + "\n".join(f"- {d}" for d in done) + "\n## Facts\n- f"
    new = ("## Done\n" + "\n".join(f"- {w}" for w in written) if with_section else "## Goal\nx")
    merged = merge_done(previous, new)
    section = merged.split("## Done", 1)[1] if done or with_section else ""
    for item in done:
        assert f"- {item}" in section
    if with_section:
        for item in written:
            assert item in merged
