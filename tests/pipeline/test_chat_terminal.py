"""``mibyan chat`` in a real terminal (tmux), against the fake server: a turn rendered as
markdown, a tool call with its approval asked inline, Ctrl-C interrupting a model call, /new
and /resume, history across runs, completion of slash commands, Ctrl-C twice and Ctrl-D to
exit. Every session replays identically afterwards."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.shell.replay import replay
from tests.fake_openai import Reply
from tests.pipeline.test_cli import PROVIDER_VARIABLES, ArrivalServer
from tests.pipeline.tmux import Tmux, base_environment

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

BANNER = "/help lists the commands"
KEY = "sk-chat-tmux-key-0123456789"


@pytest.fixture
def terminal(tmp_path) -> Iterator[Tmux]:
    tmux = Tmux(tmp_path)
    try:
        yield tmux
    finally:
        tmux.close()


def _start(terminal: Tmux, home: Path, base_url: str, *args: str) -> None:
    env = {**base_environment(home), "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": KEY,
           "MIBYAN_MODEL": "gpt-4o-mini"}
    terminal.start(["chat", *args], env, unset=PROVIDER_VARIABLES)
    terminal.wait_for(BANNER)


def _sessions(home: Path) -> list[str]:
    return sorted(p.name.removesuffix(".jsonl") for p in (home / "sessions").glob("*.jsonl"))


def test_a_turn_a_tool_call_with_approval_history_and_completion(server, home, tmp_path,
                                                                  terminal):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    server.script(Reply.text("# Greeting\nHello **world**.\n\n```python\nprint('hi')\n```\n"),
                  Reply.tool_calls([("terminal", '{"command": "rm -rf sub"}')]),
                  Reply.tool_calls([("clarify", '{"question": "Which colour next?", '
                                                '"choices": ["red", "blue"]}')]),
                  Reply.text("Removed it; blue next."))
    _start(terminal, home, server.base_url, "--workdir", str(work))
    terminal.line("say hello")
    screen = terminal.wait_for(" · 1 call · ")
    assert "Hello world." in screen and "print('hi')" in screen
    assert "**" not in screen and "```" not in screen  # rendered, not raw markdown
    terminal.line("remove sub")
    screen = terminal.wait_for("allow? [o]nce")
    assert "the model wants to run rm -rf sub" in screen
    assert (work / "sub").is_dir()  # nothing runs before the answer
    terminal.line("o", prompt="allow? [o]nce / [s]ession / [a]lways / [d]eny:")
    # The clarify tool asks inline; its choices are drawn after the question, so the screen is
    # read once the last of them shows.
    screen = terminal.wait_for("2. blue")
    assert "Which colour next?" in screen and "1. red" in screen
    assert "⚙ terminal  rm -rf sub" in screen and "✓ terminal" in screen
    assert not (work / "sub").exists()
    terminal.line("2", prompt="answer:")
    terminal.wait_for("Removed it; blue next.")
    assert '"answer":"blue"' in server.requests[-1]["messages"][-1]["content"]
    terminal.wait_prompt()
    terminal.keys("C-d")
    terminal.wait_for("[exited 0]")
    [sid] = _sessions(home)
    assert replay(home / "sessions", sid).identical

    # A new run: the history holds the last run's messages; slash commands complete.
    _start(terminal, home, server.base_url)
    terminal.wait_prompt()
    terminal.keys("Up")
    terminal.wait_for("> remove sub")
    terminal.keys("C-c")  # clears the line, does not exit
    terminal.type("/res")
    terminal.wait_for("continue a session")  # the completion menu, with the command's help
    terminal.keys("Tab")
    terminal.wait_for("> /resume")
    terminal.keys("C-c")
    terminal.line("/exit")
    terminal.wait_for("[exited 0]")


def test_ctrl_c_interrupts_the_call_and_resume_continues_the_session(home, terminal):
    with ArrivalServer() as slow:
        slow.script(Reply.hang(60), Reply.text("Hello again."), Reply.text("Resumed fine."))
        _start(terminal, home, slow.base_url)
        terminal.line("slow question")
        assert slow.arrived.wait(90), "the model call never reached the server"
        terminal.wait_for("waiting for the model")  # the spinner
        terminal.keys("C-c")
        screen = terminal.wait_for("interrupted_during_api_call")
        assert "interrupted (model call)" in screen
        [sid] = _sessions(home)
        terminal.line("/new")
        terminal.wait_for("new session: it starts with your next message")
        terminal.wait_prompt()
        terminal.type("hello")
        terminal.keys("C-j")  # a second line, not sent yet
        terminal.type("there")
        terminal.wait_for("… there")
        terminal.keys("Enter")
        terminal.wait_for("Hello again.")
        assert slow.requests[-1]["messages"][-1]["content"] == "hello\nthere"
        terminal.line(f"/resume {sid}")
        terminal.wait_for(f"resumed session {sid}")
        terminal.line("and now?")
        terminal.wait_for("Resumed fine.")
        slow.assert_done()
        users = [m["content"] for m in slow.requests[-1]["messages"] if m["role"] == "user"]
        assert users == ["slow question", "and now?"]
        # Ctrl-C at an empty prompt warns; a second one exits.
        terminal.wait_prompt()
        terminal.keys("C-c")
        terminal.wait_for("(Ctrl-C again, or Ctrl-D, to exit)")
        terminal.wait_prompt()
        terminal.keys("C-c")
        terminal.wait_for("[exited 0]")
    assert len(_sessions(home)) == 2
    for session_id in _sessions(home):
        assert replay(home / "sessions", session_id).identical


@pytest.mark.local_model
def test_a_turn_on_the_embedded_local_model(tmp_path, terminal):
    """No provider configured: the chat runs the embedded model (slow: one short turn)."""
    home = tmp_path / "local-home"
    terminal.start(["chat", "--no-tools", "--max-tokens", "16"], base_environment(home),
                   unset=PROVIDER_VARIABLES)
    screen = terminal.wait_for(BANNER, timeout=300)
    assert "embedded local model" in screen and "(local)" in screen
    terminal.line("What is the capital of France?")
    screen = terminal.wait_for(" · 1 call · ", timeout=300)
    assert "$0.0000" in screen  # the local model costs nothing
    terminal.wait_prompt()
    terminal.keys("C-d")
    terminal.wait_for("[exited 0]")
    [sid] = _sessions(home)
    assert replay(home / "sessions", sid).identical
