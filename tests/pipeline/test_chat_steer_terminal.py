"""Steering from the chat's input line in a real terminal (tmux), against the fake server: a
line typed while a slow tool runs, sent with Enter, is the last message of the very next
request; a line sent with Esc while a model call hangs interrupts it and the turn goes on with
the line; Ctrl-C alone still interrupts (what was typed stays on the next prompt). Each
session replays identically (``mibyan replay``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_openai import Reply
from tests.pipeline.test_cli import PROVIDER_VARIABLES, ArrivalServer, mibyan
from tests.pipeline.tmux import Tmux, base_environment

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

BANNER = "/help lists the commands"
KEY = "sk-chat-steer-tmux-0123456789"
STEER = "use the staging database, not production"
# A tool that runs until the test lets it finish (a file appears in the working tree).
SLOW_TOOL = '{"command": "while [ ! -e go ]; do sleep 0.1; done; echo migrated"}'


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


def _replays(home: Path) -> None:
    for log in (home / "sessions").glob("*.jsonl"):
        done = mibyan(home, "replay", log.name.removesuffix(".jsonl"))
        assert done.stdout.startswith("identical ("), done.stdout + done.stderr


def test_enter_steers_a_running_tool_batch_into_the_next_request(server, home, tmp_path,
                                                                 terminal):
    work = tmp_path / "work"
    work.mkdir()
    server.script(Reply.tool_calls([("terminal", SLOW_TOOL)]),
                  Reply.text("Migrated **staging**."))
    _start(terminal, home, server.base_url, "--workdir", str(work))
    terminal.line("migrate the database")
    terminal.wait_for("⚙ terminal  while")
    terminal.wait_for("type to steer")  # the input line is open under the running turn
    terminal.type(STEER)
    terminal.keys("Enter")
    # The line shows once it is sent, marked as steered.
    screen = terminal.wait_for(f"» {STEER}  (steered: the model reads it after this step)")
    assert f"> {STEER}" not in screen  # not echoed a second time as a prompt's line
    (work / "go").touch()
    screen = terminal.wait_for("Migrated staging.")
    assert "↳ the steered message joins the conversation" in screen
    terminal.wait_prompt()
    first, second = server.requests
    assert second["messages"][-1] == {"role": "user", "content": STEER}
    assert second["messages"][-2]["role"] == "tool"
    assert STEER not in str(first["messages"])
    terminal.keys("Up")  # a steered line is in the history like any other
    terminal.wait_for(f"> {STEER}")
    terminal.keys("C-c")
    terminal.keys("C-d")
    terminal.wait_for("[exited 0]")
    _replays(home)


def test_esc_interrupts_with_the_line_and_ctrl_c_alone_still_interrupts(home, terminal):
    with ArrivalServer() as slow:
        slow.script(Reply.hang(60), Reply.text("Staging it is."), Reply.hang(60))
        _start(terminal, home, slow.base_url)
        terminal.line("migrate production")
        assert slow.arrived.wait(90), "the model call never reached the server"
        terminal.wait_for("waiting for the model")
        terminal.type(STEER)
        terminal.keys("Escape")
        screen = terminal.wait_for("Staging it is.")
        assert f"» {STEER}  (interrupting: the turn goes on with it)" in screen
        # The notice is printed above the input line, which may draw the reply first.
        terminal.wait_for("interrupted (model call)")
        assert slow.requests[-1]["messages"][-1] == {"role": "user", "content": STEER}
        terminal.wait_prompt()

        # Ctrl-C with a line half typed: the turn is interrupted, the line is kept for later.
        slow.arrived.clear()
        terminal.line("another slow one")
        assert slow.arrived.wait(90), "the model call never reached the server"
        terminal.wait_for("type to steer")
        terminal.type("half typed")
        terminal.keys("C-c")
        screen = terminal.wait_for("interrupted_during_api_call")
        terminal.wait_for("> half typed")
        assert len(slow.requests) == 3
        slow.assert_done()
        terminal.keys("C-c")  # clears the line
        terminal.wait_prompt()
        terminal.keys("C-d")
        terminal.wait_for("[exited 0]")
    _replays(home)
