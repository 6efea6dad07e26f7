"""The chat's pure parts: markdown blocks as they stream, the short texts (argument summary,
collapsed output, usage and cost), the slash command table, the inline answers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.chat import slash
from pipeline.chat.blocks import BlockSplitter
from pipeline.chat.inline import approval_choice, clarify_answer
from pipeline.chat.text import argument_summary, collapsed, usage_text
from stages.log.events import Usage

ANSWER = ("Intro line one\nstill intro\n\n# Title\nText before code\n```python\n"
          "def f():\n\n    return 1\n```\nAfter code.\n\n- a\n- b\n")


def test_blocks_complete_at_blank_lines_headings_and_closing_fences() -> None:
    splitter = BlockSplitter()
    blocks = splitter.feed(ANSWER)
    assert blocks == ["Intro line one\nstill intro", "# Title", "Text before code",
                      "```python\ndef f():\n\n    return 1\n```", "After code."]
    assert splitter.pending == "- a\n- b\n"
    assert splitter.flush() == "- a\n- b\n" and splitter.pending == ""


def test_a_code_block_closes_at_a_fence_at_least_as_long_as_its_own() -> None:
    splitter = BlockSplitter()
    # A markdown example inside a four-backtick block: its three-backtick lines are code.
    example = "````md\n```python\nx = 1\n```\n````\n"
    assert splitter.feed(example + "After.\n\n") == [example.strip("\n"), "After."]
    # A longer closing fence closes a three-backtick block.
    assert splitter.feed("```\ny = 2\n`````\nNext.\n\n") == ["```\ny = 2\n`````",
                                                              "Next."]


def test_a_block_is_not_complete_until_its_line_is() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("```py\nx = 1\n``") == []
    assert splitter.pending == "```py\nx = 1\n``"
    assert splitter.feed("`\n") == ["```py\nx = 1\n```"]


@given(st.lists(st.integers(min_value=1, max_value=7), max_size=40),
       st.lists(st.sampled_from(["word ", "\n", "\n\n", "```", "```py\n", "# h\n", "  ", "~~~"]),
                max_size=30))
def test_blocks_do_not_depend_on_how_the_text_was_cut(cuts, pieces) -> None:
    """Fed at once or piece by piece, the same blocks come out, and nothing is lost."""
    text = "".join(pieces)
    whole = BlockSplitter()
    expected = [*whole.feed(text), whole.flush()]
    streamed, rest, position = BlockSplitter(), [], 0
    for cut in cuts:
        rest += streamed.feed(text[position:position + cut])
        position += cut
    rest += streamed.feed(text[position:])
    assert [*rest, streamed.flush()] == expected
    assert "\n".join(expected).split() == text.split()


@pytest.mark.parametrize("name, arguments, expected", [
    ("terminal", '{"command": "ls -la   /tmp", "timeout": 5}', "ls -la /tmp"),
    ("read_file", '{"path": "src/app.py", "offset": 10}', "src/app.py"),
    ("custom", '{"a": 1, "b": "two"}', "a=1 b=two"),
    ("custom", "not json", "not json"),
    ("custom", "", ""),
    ("terminal", '{"command": "' + "x" * 100 + '"}', "x" * 59 + "…"),
])
def test_the_argument_summary_says_what_matters(name, arguments, expected) -> None:
    assert argument_summary(name, arguments) == expected


def test_long_output_is_collapsed_to_its_first_lines() -> None:
    shown, more = collapsed("\n".join(f"line {n}" for n in range(10)) + "\n")
    assert shown == ["line 0", "line 1", "line 2"] and more == 7
    assert collapsed("short") == (["short"], 0)
    [cut], _ = collapsed("y" * 300)
    assert len(cut) == 100 and cut.endswith("…")


def test_usage_text_shows_cache_hits_and_reasoning() -> None:
    usage = Usage(input_tokens=200, cache_read_tokens=800, output_tokens=50,
                  reasoning_tokens=20)
    assert usage_text(usage) == "1,000 in (800 cached) · 50 out (20 reasoning)"
    assert usage_text(Usage(input_tokens=5, output_tokens=1)) == "5 in · 1 out"
    # Anthropic's thinking is inside the output count: no "0 reasoning", no made-up number.
    assert usage_text(Usage(input_tokens=5, output_tokens=30, reasoning_in_output=True)) == (
        "5 in · 30 out (reasoning included)")
    mixed = Usage(input_tokens=5, output_tokens=30, reasoning_tokens=4, reasoning_in_output=True)
    assert usage_text(mixed) == "5 in · 30 out (4+ reasoning)"


def test_every_command_has_a_one_line_help_and_exit_comes_last() -> None:
    expected = {"help", "new", "resume", "sessions", "model", "tools", "compress", "usage",
                "replay", "fork", "export", "memory", "skills", "exit"}
    assert expected <= set(slash.COMMANDS)
    for entry in slash.COMMANDS.values():
        assert entry.help and "\n" not in entry.help and len(entry.help) < 80
    assert slash.names()[-1] == "/exit"


def test_a_registered_command_is_one_entry_listed_before_exit(monkeypatch) -> None:
    monkeypatch.setattr(slash, "COMMANDS", dict(slash.COMMANDS))
    calls = []
    slash.register(slash.SlashCommand("mark", "mark this point", lambda s, a: calls.append(a),
                                      "[at]"))
    assert slash.names()[-2:] == ["/mark", "/exit"]
    assert slash.run(object(), "/mark 12") is True  # type: ignore[arg-type]
    assert calls == ["12"]


@pytest.mark.parametrize("typed, choice", [
    ("o", "once"), ("S", "session"), ("always", "always"), ("a", "always"), ("", "deny"),
    ("no", "deny"), ("x", "deny"), ("d", "deny")])
def test_approval_answers(typed, choice) -> None:
    assert approval_choice(typed) == choice


def test_clarify_answers_pick_a_choice_by_number_or_are_free_text() -> None:
    assert clarify_answer("2", ("red", "blue")) == "blue"
    assert clarify_answer("3", ("red", "blue")) == "3"
    assert clarify_answer(" green ", ("red", "blue")) == "green"
    assert clarify_answer("²", ("red", "blue")) == "²"  # a digit, but no number
