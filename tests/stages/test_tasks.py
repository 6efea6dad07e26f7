"""The todo list carried across a compression (rules 8 ``todo_in_summary``): named examples of
where the latest list stands and how it joins the summary, a property over any list, and a
long turn through a real Agent whose list survives its compressions, a resume and a replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effects.tools.clarify_todo import TODO_STATUSES, TodoList
from pipeline import Agent
from pipeline.shell import replay
from pipeline.testing import ScriptedModel, tool_calls
from pipeline.toolsets import builtin_tools
from stages.context.summary import dropped_marker, summary_text, without_compaction
from stages.context.tasks import TASKS_HEADING, carried_tasks, tasks_in, with_tasks
from stages.log.events import CompressionPlanned
from stages.log.messages import Message, ToolCall

ITEMS = [{"id": "1", "content": "read the config", "status": "completed"},
         {"id": "2", "content": "fix the parser", "status": "in_progress"}]


def _todo(items: list[dict[str, str]], call: str = "t1") -> list[Message]:
    return [Message(role="assistant", tool_calls=(ToolCall(id=call, name="todo",
                                                           arguments="{}"),)),
            Message(role="tool", tool_call_id=call, name="todo",
                    content=json.dumps({"todos": items, "open": 1}))]


def _plan(head: int, tail_start: int, kept: int | None = None) -> CompressionPlanned:
    return CompressionPlanned(reason="preflight", head=head, tail_start=tail_start, kept=kept,
                              estimated_tokens=0, window=4_000, message_count=tail_start)


HISTORY = [Message(role="user", content="go"), *_todo(ITEMS),
           Message(role="assistant", content="working"), Message(role="user", content="more"),
           Message(role="assistant", content="ok")]


def test_a_list_leaving_with_the_middle_is_carried() -> None:
    lines = carried_tasks(HISTORY, _plan(head=1, tail_start=4))
    assert lines == ("- [completed] (id 1) read the config\n"
                     "- [in_progress] (id 2) fix the parser")


def test_a_list_the_tail_keeps_is_not_carried() -> None:
    assert carried_tasks(HISTORY, _plan(head=1, tail_start=2)) is None
    assert carried_tasks(HISTORY[:1] + HISTORY[3:], _plan(head=1, tail_start=3)) is None


def test_an_empty_list_is_not_carried() -> None:
    history = [Message(role="user", content="go"), *_todo([]), Message(role="user", content="x")]
    assert carried_tasks(history, _plan(head=1, tail_start=3)) is None


def test_the_list_joins_the_summary_block_and_leaves_with_it() -> None:
    lines = carried_tasks(HISTORY, _plan(head=1, tail_start=4))
    assert lines is not None
    text = with_tasks(summary_text("## Goal\n- g"), lines)
    assert text.index(TASKS_HEADING) < text.index("[End of summary]")
    assert tasks_in(text) == ITEMS
    assert without_compaction(f"question\n\n{text}") == "question"


def test_a_dropped_middle_marker_carries_it_in_a_block_of_its_own() -> None:
    text = with_tasks(dropped_marker(3, None), "- [pending] (id a) b")
    assert tasks_in(text) == [{"id": "a", "content": "b", "status": "pending"}]
    assert without_compaction(f"q\n\n{text}") == "q"


def test_a_previous_summarys_list_is_carried_again() -> None:
    summary = Message(role="assistant", content=with_tasks(summary_text("s"), "- [pending] "
                                                           "(id 9) keep me"))
    history = [Message(role="user", content="go"), summary, Message(role="user", content="x")]
    # The summary sits in the head here, and is still replaced by the next compression.
    assert carried_tasks(history, _plan(head=2, tail_start=2)) == "- [pending] (id 9) keep me"


def test_a_later_todo_result_wins_over_a_summarys_copy() -> None:
    summary = Message(role="user", content=with_tasks(summary_text("s"), "- [pending] (id 9) "
                                                      "old"))
    todos = TodoList()
    todos.restore([summary, *_todo(ITEMS)])
    assert todos.todo()["todos"] == ITEMS
    todos.restore([*_todo(ITEMS), summary])
    assert todos.todo()["todos"] == [{"id": "9", "content": "old", "status": "pending"}]


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1,
                max_size=30).filter(lambda s: s.split())
_item = st.fixed_dictionaries({"id": st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True),
                               "content": _text, "status": st.sampled_from(TODO_STATUSES)})


@given(items=st.lists(_item, min_size=1, max_size=8), summary=_text, failed=st.booleans())
def test_any_list_round_trips_through_a_compression(items, summary, failed) -> None:
    history = [Message(role="user", content="go"), *_todo(items),
               Message(role="user", content="next")]
    lines = carried_tasks(history, _plan(head=1, tail_start=3))
    assert lines is not None
    inserted = dropped_marker(2, None) if failed else summary_text(summary)
    text = with_tasks(inserted, lines)
    assert tasks_in(text) == [{**item, "content": " ".join(item["content"].split())}
                              for item in items]
    # Carried once: the next compression's copy replaces this one.
    again = carried_tasks([history[0], Message(role="assistant", content=text),
                           history[-1]], _plan(head=1, tail_start=2))
    assert again == lines


# --- a long turn through a real Agent ----------------------------------------------------------

@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    for n in range(40):
        (root / f"f{n}.txt").write_text(f"file {n} " + "x" * 400)
    return root


def _model(sent: list[str]):
    files = iter(range(40))

    def model(request):
        if request.purpose == "compression":
            return "## Goal\n- read files\n## Done\n- read some\n## In Progress\n- the next"
        sent.append("\n".join(m.content or "" for m in request.messages))
        if len(sent) == 1:
            return tool_calls(("todo", {"todos": ITEMS}))
        n = next(files, None)
        return "read them all" if n is None else tool_calls(("read_file", {"path": f"f{n}.txt"}))
    return model


def test_the_list_survives_a_long_turn_a_resume_and_a_replay(tree: Path, tmp_path: Path) -> None:
    sent: list[str] = []
    home = tmp_path / "home"
    tools = builtin_tools(tree, toolsets=("files", "planning"))
    with Agent(client=ScriptedModel(*[_model(sent)] * 200), tools=tools, home=home,
               context_length=4_000, max_turns=80) as agent:
        result = agent.run_conversation("read every file, one at a time, keep a todo list")
        sid = agent.session_id
    assert result["completed"], result
    # Compressed several times; every request after the first compression still shows the list.
    after = [text for text in sent if "[Summary of the earlier conversation" in text]
    assert len(after) > 5
    assert all("- [in_progress] (id 2) fix the parser" in text for text in after)
    assert all(text.count(TASKS_HEADING) == 1 for text in after)
    assert replay.replay(home / "sessions", sid).identical
    # A resumed session's todo tool takes the list back from the summary.
    resumed = builtin_tools(tree, toolsets=("files", "planning"))
    def answer(request):  # the history is near its window: the turn may compress first
        return "## Goal\n- g" if request.purpose == "compression" else "fine"
    with Agent(client=ScriptedModel(*[answer] * 3), tools=resumed, home=home, session_id=sid,
               context_length=4_000) as agent:
        agent.run_conversation("what is left?")
    assert resumed.todos.todo()["todos"] == ITEMS
