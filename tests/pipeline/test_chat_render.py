"""The terminal display, recorded by a rich Console: markdown blocks, highlighted code, tool
lines with collapsed output, a subagent's lines nested under its parent's, the usage line."""

from __future__ import annotations

import io

from rich.console import Console

from pipeline.chat.listen import EventRouter
from pipeline.chat.render import RichDisplay
from stages.log import events as ev
from stages.log.messages import Message, ToolCall
from stages.log.tool_specs import ToolOutcome


def _display(terminal: bool = False) -> tuple[RichDisplay, Console]:
    console = Console(file=io.StringIO(), record=True, width=80, force_terminal=terminal,
                      color_system="truecolor" if terminal else None)
    return RichDisplay(console), console


def _reply(content=None, *calls) -> ev.ModelReplied:
    return ev.ModelReplied(message=Message(role="assistant", content=content, tool_calls=calls),
                           finish_reason="tool_calls" if calls else "stop",
                           usage=ev.Usage(input_tokens=1), model="m", latency_ms=1.0)


def test_a_streamed_answer_is_rendered_as_markdown_block_by_block() -> None:
    display, console = _display()
    router = EventRouter(display)
    display.begin_turn()
    for piece in ("# Plan\nSome **bold** te", "xt.\n\n```python\ndef f():\n", "    return 1\n",
                  "```\nThe end."):
        router.delta(piece)
    # Three blocks are complete and shown; the last one is still arriving.
    shown = console.export_text(clear=False)
    assert "Plan" in shown and "Some bold text." in shown and "def f():" in shown
    assert "**" not in shown and "```" not in shown and "The end." not in shown
    router.parent(_reply("ignored: it streamed"))
    display.end_turn("10 in · 2 out · $0.0000 · 1 call · 0.1 s")
    text = console.export_text()
    assert "The end." in text and "ignored" not in text
    assert text.rstrip().endswith("10 in · 2 out · $0.0000 · 1 call · 0.1 s")


def test_code_is_highlighted_once_its_block_is_complete() -> None:
    display, console = _display(terminal=True)
    display.begin_turn()
    display.delta("```python\ndef f():\n    return 1\n```\n")
    display.end_turn(None)
    styled = console.export_text(styles=True, clear=False)
    plain = console.export_text()
    assert "def" in plain and "\x1b[" in styled
    # The keyword has a colour of its own (the syntax theme's).
    assert any("def" in line and "\x1b[38;2;" in line for line in styled.splitlines())


def test_a_reply_that_did_not_stream_is_shown_whole() -> None:
    display, console = _display()
    router = EventRouter(display)
    display.begin_turn()
    router.parent(ev.ModelRequested(call_index=0, purpose="turn", provider="p", model="m",
                                    message_count=1, tool_count=0, estimated_tokens=1))
    router.parent(_reply("A *plain* reply."))
    display.end_turn(None)
    assert "A plain reply." in console.export_text()


def test_tool_calls_show_as_they_start_and_finish_with_long_output_collapsed() -> None:
    display, console = _display()
    router = EventRouter(display)
    display.begin_turn()
    router.parent(_reply("Let me look.", ToolCall(id="c1", name="terminal",
                                                  arguments='{"command": "seq 10"}'),
                         ToolCall(id="c2", name="read_file", arguments='{"path": "x"}')))
    router.parent(ev.ToolsPlanned(call_ids=("c1", "c2"), concurrent=False))
    router.parent(ev.ToolRan(outcome=ToolOutcome(call_id="c1", name="terminal", ok=True,
                                                 content="\n".join(map(str, range(1, 11))),
                                                 duration_ms=12.4)))
    router.parent(ev.ToolRan(outcome=ToolOutcome(call_id="c2", name="read_file", ok=False,
                                                 content="", error="ToolError: no file x",
                                                 duration_ms=1.0)))
    display.end_turn(None)
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert lines[0] == "Let me look."
    assert "⚙ terminal  seq 10" in lines[1] and "⚙ read_file  x" in lines[2]
    assert "✓ terminal  12 ms" in lines[3]
    assert [line.strip() for line in lines[4:8]] == ["1", "2", "3", "… 7 more lines"]
    assert "✗ read_file  ToolError: no file x  1 ms" in lines[8]


def test_a_subagent_s_progress_is_nested_under_its_parent() -> None:
    display, console = _display()
    router = EventRouter(display)
    display.begin_turn()
    router.parent(_reply(None, ToolCall(id="p1", name="delegate_task",
                                        arguments='{"goal": "count the files"}')))
    router.parent(ev.ToolsPlanned(call_ids=("p1",), concurrent=False))
    goal = "count the files"
    router.child(goal, ev.TurnStarted(turn_id="t", task_id="k", started_at="now",
                                      user_message=goal))
    router.child(goal, _reply(None, ToolCall(id="p1", name="terminal",
                                             arguments='{"command": "ls | wc -l"}')))
    router.child(goal, ev.ToolsPlanned(call_ids=("p1",), concurrent=False))
    router.child(goal, ev.ToolRan(outcome=ToolOutcome(call_id="p1", name="terminal", ok=True,
                                                      content="3", duration_ms=5.0)))
    router.child(goal, ev.TurnFinished(exit_reason="text_response", final_response="3 files",
                                       completed=True))
    router.parent(ev.ToolRan(outcome=ToolOutcome(call_id="p1", name="delegate_task", ok=True,
                                                 content="{}", duration_ms=900.0)))
    display.end_turn(None)
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert "⚙ delegate_task  count the files" in lines[0]
    nested = [line for line in lines if "│ [count the files]" in line]
    assert len(nested) == 4
    assert "subagent started" in nested[0] and "⚙ terminal  ls | wc -l" in nested[1]
    assert "✓ terminal" in nested[2] and "subagent finished: text_response" in nested[3]
    # The child's tool output is not expanded; the parent's call finishes after it.
    assert "✓ delegate_task" in lines[-2] and lines.index(nested[3]) < lines.index(lines[-2])


def test_notices_tables_and_the_spinner_on_a_terminal() -> None:
    display, console = _display(terminal=True)
    display.begin_turn()
    display.waiting()
    display.pause()
    display.resume()
    display.notice("interrupted (model call)", "warn")
    display.end_turn(None)
    display.table(("command", "what it does"), [("/resume [id]", "continue a session")])
    text = console.export_text()
    assert "interrupted (model call)" in text
    assert "command" in text and "/resume [id]" in text and "continue a session" in text


def test_model_and_tool_text_reaches_the_terminal_with_its_control_characters_escaped() -> None:
    display, console = _display(terminal=True)
    router = EventRouter(display)
    display.begin_turn()
    router.delta("\x1b]0;pwned\x07\x1b[2Jhello\n\nrest\x1b[")
    display.tool_started("terminal", "echo \x1b[2J", depth=0, label="")
    display.tool_finished("terminal", ok=False, error="bad \x07", duration_ms=1.0,
                          output="out \x1b]0;t\x07", depth=0, label="")
    display.notice("the turn failed: \x1b[31m")
    display.table(("a",), [("\x1b[2J",)])
    display.end_turn(None)
    raw = console.file.getvalue()
    for sequence in ("\x1b]0;", "\x07", "\x1b[2J"):  # rich's own styles are the only escapes
        assert sequence not in raw
    text = console.export_text()
    assert "\\x1b]0;pwned\\x07\\x1b[2Jhello" in text and "echo \\x1b[2J" in text
    assert "bad \\x07" in text and "out \\x1b]0;t\\x07" in text
    assert "failed: \\x1b[31m" in text and "\\x1b[2J" in text.split("─")[-1]


def test_an_inline_question_shows_the_model_s_text_escaped(tmp_path) -> None:
    from pipeline.chat.inline import Question
    from pipeline.chat.terminal import Terminal
    from pipeline.shell.approval import ApprovalRequest
    console = Console(file=io.StringIO(), record=True, width=120, force_terminal=True)
    terminal = Terminal(tmp_path, console)

    class Typed:
        def prompt(self, message: str) -> str:
            return "1"
    terminal.answers = Typed()
    request = ApprovalRequest(tool="terminal", command="rm -rf x\x1b[2J", pattern="rm",
                              description="recursive\x07delete")
    terminal.ask(Question(request=request))
    terminal.ask(Question(text="which?\x1b]0;t\x07", choices=("a\x1b[2J", "b")))
    raw = console.file.getvalue()
    assert "\x1b[2J" not in raw and "\x07" not in raw and "\x1b]0;" not in raw
    text = console.export_text()
    assert "rm -rf x\\x1b[2J" in text and "recursive\\x07delete" in text
    assert "which?\\x1b]0;t\\x07" in text and "1. a\\x1b[2J" in text


def test_help_wraps_between_words_on_a_narrow_terminal() -> None:
    # Issue 25: /help's keys line went out unwrapped (soft wrap), so the terminal broke it
    # mid-word at its edge.
    from pipeline.chat.slash import KEYS_HELP, _listed
    for width in (80, 60, 48):
        console = Console(file=io.StringIO(), record=True, width=width)
        display = RichDisplay(console)
        rows = [(entry.usage, entry.help) for entry in _listed()]
        display.table(("command", "what it does"), rows)
        display.text(KEYS_HELP)
        shown = console.export_text()
        assert max(len(line) for line in shown.splitlines()) <= width
        words = set(shown.split())
        for word in " ".join(help_text for _, help_text in rows).split() + KEYS_HELP.split():
            assert word in words, (width, word)


def test_below_an_input_line_the_live_area_is_drawn_by_the_line_not_by_rich_live() -> None:
    display, _ = _display(terminal=True)
    with display.below_prompt():
        display.begin_turn()
        assert display._live is None  # rich's Live would fight the input line for the screen
        assert "waiting for the model" in display.live_ansi(5)  # the spinner
        display.delta("".join(f"line {n}\n" for n in range(1, 9)))  # one block, still open
        shown = display.live_ansi(3)
        assert "line 6" in shown and "line 8" in shown and "line 5" not in shown
        display.end_turn(None)
        assert display.live_ansi(3) == ""  # no turn: nothing above the line
    display.begin_turn()  # outside, rich's Live is back
    assert display._live is not None
    display.end_turn(None)
