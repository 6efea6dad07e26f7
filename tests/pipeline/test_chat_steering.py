"""Lines typed while a chat turn runs, in-process: what a line does (``dispatch``), and a chat
session whose input line is scripted (the terminal's is driven in
``test_chat_steer_terminal.py``) against the fake OpenAI server on loopback: Enter steers the
line into the very next request, Esc interrupts and goes on with it, Ctrl-C interrupts, a
slash command waits, and a question of the turn takes the terminal from the input line."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pipeline.chat.display import PlainDisplay
from pipeline.chat.inline import Question
from pipeline.chat.options import ChatOptions
from pipeline.chat.session import ChatSession
from pipeline.chat.steering import Ignore, Interrupt, Steer, Typed, dispatch
from pipeline.shell.replay import replay
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.test_cli import PROVIDER_VARIABLES

KEY = "sk-chat-steer-key-0123456789"
STEER = "use the staging database, not production"
WAIT = 30.0


@pytest.fixture(autouse=True)
def no_provider_environment(monkeypatch):
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


class GatedServer(FakeOpenAIServer):
    """Holds the first request until ``gate`` opens, so a test types while it is in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived, self.gate = threading.Event(), threading.Event()

    def _record(self, body, headers):
        try:
            return super()._record(body, headers)
        finally:
            self.arrived.set()
            if len(self.requests) == 1:
                self.gate.wait(WAIT)


@pytest.fixture
def server() -> Iterator[GatedServer]:
    with GatedServer() as srv:
        try:
            yield srv
        finally:
            srv.gate.set()
        srv.assert_done()


class ScriptedLine:
    """The input line: each ``read`` plays the next step (a line, a Ctrl-C, or waiting until
    the line must give way); then it waits like the terminal's, returning None when done."""

    def __init__(self, *steps: Callable[[], Typed | None]) -> None:
        self.steps = list(steps)
        self.given_way = 0  # reads that ended because the turn ended or a question waited
        self.turns = 0

    @contextmanager
    def during(self) -> Iterator[None]:
        self.turns += 1
        yield

    def read(self, done: Callable[[], bool]) -> Typed | None:
        if self.steps:
            return self.steps.pop(0)()
        while not done():
            threading.Event().wait(0.01)
        self.given_way += 1
        return None


def _chat(server, tmp_path: Path, line: ScriptedLine, asker=None) -> tuple[ChatSession,
                                                                             io.StringIO]:
    options = ChatOptions(home=tmp_path / "home", workdir=tmp_path, model="gpt-4o-mini",
                          base_url=server.base_url, overrides={"api_key": KEY})
    err = io.StringIO()
    return ChatSession(options, PlainDisplay(io.StringIO(), err), asker=asker,
                       typing=line), err


@pytest.mark.parametrize(("typed", "action"), [
    (Typed(STEER), Steer(STEER)),
    (Typed(STEER, now=True), Interrupt(STEER)),
    (Typed("first line\nsecond\n"), Steer("first line\nsecond")),
    (Typed("//etc is fine"), Steer("/etc is fine")),
    (Typed("  \n"), Ignore()),
])
def test_what_a_line_typed_into_a_running_turn_does(typed, action):
    assert dispatch(typed) == action


def test_a_slash_command_waits_for_the_prompt():
    action = dispatch(Typed("/new now", now=True))
    assert isinstance(action, Ignore) and action.notice.startswith("/new waits for the prompt")


def test_enter_steers_the_line_into_the_very_next_request(server, tmp_path):
    server.script(Reply.tool_calls([("terminal", '{"command": "echo migrating"}')]),
                  Reply.text("Migrated staging."))

    def steer_in_flight() -> Typed:
        assert server.arrived.wait(WAIT)
        return Typed(STEER)

    def open_gate() -> None:
        server.gate.set()

    line = ScriptedLine(steer_in_flight, lambda: Typed("/usage"),
                        lambda: (open_gate(), None)[1])
    chat, err = _chat(server, tmp_path, line)
    with chat:
        result = chat.send("migrate the database")
        sid = chat.session_id
    assert result is not None and result.completed and line.turns == 1
    first, second = server.requests
    assert second["messages"][-1] == {"role": "user", "content": STEER}
    assert second["messages"][-2]["role"] == "tool"
    assert STEER not in str(first["messages"])
    shown = err.getvalue().splitlines()
    assert f"steered: » {STEER}  (steered: the model reads it after this step)" in shown
    assert "warn: /usage waits for the prompt: only a message joins a running turn (// sends " \
           "one that starts with /)" in shown
    assert "↳ the steered message joins the conversation" in shown
    assert replay(tmp_path / "home" / "sessions", sid).identical


def test_esc_interrupts_the_step_and_the_turn_goes_on_with_the_line(tmp_path):
    with GatedServer() as slow:
        slow.script(Reply.hang(60), Reply.text("Staging it is."))

        def now_in_flight() -> Typed:
            assert slow.arrived.wait(WAIT)
            return Typed(STEER, now=True)

        slow.gate.set()  # the hanging reply holds the first request
        chat, err = _chat(slow, tmp_path, ScriptedLine(now_in_flight))
        with chat:
            result = chat.send("migrate production")
            sid = chat.session_id
        slow.assert_done()
    assert result is not None and result.completed and not result.interrupted
    assert result.final_response == "Staging it is."
    assert slow.requests[-1]["messages"][-1] == {"role": "user", "content": STEER}
    assert f"steered: » {STEER}  (interrupting: the turn goes on with it)" in err.getvalue()
    assert "interrupted (model call)" in err.getvalue()
    assert replay(tmp_path / "home" / "sessions", sid).identical


def test_ctrl_c_on_the_input_line_interrupts_the_turn(tmp_path):
    with GatedServer() as slow:
        slow.script(Reply.hang(60))

        def ctrl_c() -> Typed:
            assert slow.arrived.wait(WAIT)
            raise KeyboardInterrupt

        slow.gate.set()
        chat, err = _chat(slow, tmp_path, ScriptedLine(ctrl_c))
        with chat:
            result = chat.send("slow question")
        slow.assert_done()
    assert result is not None and result.interrupted and chat.interrupted
    assert len(slow.requests) == 1
    assert "warn: interrupting…" in err.getvalue()


def test_a_question_of_the_turn_takes_the_terminal_from_the_input_line(server, tmp_path):
    (tmp_path / "sub").mkdir()
    server.gate.set()
    server.script(Reply.tool_calls([("terminal", '{"command": "rm -rf sub"}')]),
                  Reply.text("Removed."))
    asked: list[Question] = []

    def asker(question: Question) -> str:
        asked.append(question)
        return "once"

    line = ScriptedLine()
    chat, _ = _chat(server, tmp_path, line, asker=asker)
    with chat:
        result = chat.send("remove sub")
    assert result is not None and result.completed
    assert [q.request.command for q in asked if q.request] == ["rm -rf sub"]
    assert not (tmp_path / "sub").exists()
    assert line.given_way == 2  # once for the question, once as the turn ended
