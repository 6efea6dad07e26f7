"""``TurnResult`` as the caller gets it: ``as_dict`` through an agent's ``ReturnedMessages``
returns what a fresh conversion does, converts only the messages a result does not share with
the one before, and hands out dicts of the caller's own."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline import result as result_module
from pipeline.agent import Agent
from pipeline.result import ReturnedMessages, TurnResult
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from pipeline.tools import tool
from stages.log.messages import Message, ToolCall
from stages.log.reasoning_parts import ReasoningPart
from tests.strategies.events import messages


def fresh(history: tuple[Message, ...]) -> list[dict]:
    return [result_module._returned(m) for m in history]


# Each step: keep the first `keep` messages of the last history (by identity), then add these.
steps = st.lists(st.tuples(st.integers(min_value=0, max_value=12),
                           st.lists(messages(parts=True), max_size=4)), min_size=1, max_size=6)


@given(steps)
def test_each_history_gets_what_a_fresh_conversion_gives(plan) -> None:
    returned = ReturnedMessages()
    history: tuple[Message, ...] = ()
    for keep, added in plan:
        history = history[:keep] + tuple(added)
        assert returned(history) == fresh(history)


def test_only_the_messages_a_history_does_not_share_with_the_last_are_converted(
        monkeypatch) -> None:
    converted: list[Message] = []
    real = result_module._returned

    def counting(message: Message) -> dict:
        converted.append(message)
        return real(message)

    monkeypatch.setattr(result_module, "_returned", counting)
    history = tuple(Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i}")
                    for i in range(200))
    returned = ReturnedMessages()
    returned(history)
    assert len(converted) == 200
    grown = (*history, Message(role="user", content="new"))
    converted.clear()
    assert returned(grown)[-1] == {"role": "user", "content": "new"}
    assert converted == [grown[-1]]
    # A history that starts over from an earlier point converts from there on.
    branched = (*history[:150], Message(role="assistant", content="other"))
    converted.clear()
    got = returned(branched)
    assert converted == [branched[-1]]
    assert got == [real(m) for m in branched]


def test_the_caller_s_edits_never_reach_the_next_result() -> None:
    call = ToolCall(id="c1", name="add", arguments='{"a": 1}')
    history = (Message(role="user", content="hi"),
               Message(role="assistant", content=None, tool_calls=(call,)),
               Message(role="tool", content="2", tool_call_id="c1", name="add"),
               Message(role="assistant", content="two", reasoning="thought",
                       reasoning_parts=(ReasoningPart(type="reasoning", api_mode="codex_responses",
                                                      provider="openai", summary=("s",)),)))
    returned = ReturnedMessages()
    first = returned(history)
    expected = fresh(history)
    assert first == expected
    first[0]["content"] = "edited"
    first[1]["tool_calls"][0]["function"]["arguments"] = "{}"
    first[3]["reasoning_parts"][0]["text"] = "edited"
    first[3]["reasoning_parts"].clear()
    first[3]["reasoning"] = None
    assert returned(history) == expected
    assert returned((*history, Message(role="user", content="next")))[:4] == expected


def _agent(tmp_path, model) -> Agent:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return Agent(client=model, tools=[add], home=tmp_path / "home", clock=FakeClock(),
                 ids=CountingIds())


def test_run_conversation_returns_the_dict_of_the_turn_s_result(tmp_path) -> None:
    model = ScriptedModel("one", tool_calls(("add", {"a": 1, "b": 2})), "three", "four",
                          "five")
    with _agent(tmp_path, model) as agent:
        dicts = [agent.run_conversation("first"), agent.run_conversation("add them")]
        restarted = agent.run_conversation("again", conversation_history=[
            {"role": "user", "content": "earlier"}, {"role": "assistant", "content": "yes"}])
        dicts.append(restarted)
        assert restarted["messages"] == TurnResult.from_state(agent._runner.state).as_dict()[
            "messages"]
        dicts.append(agent.run_conversation("last"))
        assert dicts[-1] == TurnResult.from_state(agent._runner.state).as_dict()
    assert [m["content"] for m in restarted["messages"]] == ["earlier", "yes", "again", "four"]
    assert [m["role"] for m in dicts[1]["messages"]] == [
        "user", "assistant", "user", "assistant", "tool", "assistant"]
