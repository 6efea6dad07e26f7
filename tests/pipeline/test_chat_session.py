"""A chat session in-process with plain output (as when stdin is piped): turns against the fake
server, slash commands, inline approvals and clarify through an asker, a subagent's progress
nested under its parent's call, /compress, /resume, /replay."""

from __future__ import annotations

import io
import json
from pathlib import Path

import attrs
import pytest

from effects.eventlog.store import read_envelopes, session_path
from pipeline.chat.display import PlainDisplay
from pipeline.chat.inline import Question
from pipeline.chat.options import ChatOptions
from pipeline.chat.piped import piped
from pipeline.chat.session import ChatSession
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from tests.fake_openai import Reply
from tests.pipeline.test_cli import PROVIDER_VARIABLES, mibyan
from tests.pipeline.test_context import summarising

__all__ = ["summarising"]  # the fixture

KEY = "sk-chat-test-key-0123456789"


@pytest.fixture(autouse=True)
def no_provider_environment(monkeypatch):
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


class Chat:
    def __init__(self, options: ChatOptions, asker=None) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        self.session = ChatSession(options, PlainDisplay(self.out, self.err), asker=asker)

    def lines(self, *lines: str) -> int:
        return piped(self.session, [line + "\n" for line in lines])


def _options(server, tmp_path: Path, **overrides) -> ChatOptions:
    return ChatOptions(home=tmp_path / "home", workdir=tmp_path, model="gpt-4o-mini",
                       base_url=server.base_url, overrides={"api_key": KEY, **overrides})


def test_piped_lines_answer_on_stdout_with_tool_lines_and_usage_on_stderr(server, tmp_path):
    server.script(Reply.text("Four."),
                  Reply.tool_calls([("terminal", '{"command": "echo hi"}')]), Reply.text("Ran."))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        assert chat.lines("2+2?", "", "run echo", "/usage", "/bogus", "/exit", "not sent") == 0
        sid = chat.session.session_id
    assert chat.out.getvalue().splitlines()[:2] == ["Four.", "Ran."]
    assert chat.out.getvalue().splitlines()[2].startswith(f"session {sid}: ")
    err = chat.err.getvalue().splitlines()
    assert err[0].startswith("[") and " in · " in err[0] and "1 call" in err[0]
    assert err[1:3] == ["  [tool] terminal echo hi", err[2]] and "-> ok" in err[2]
    assert "2 calls" in err[3]
    assert err[4] == "warn: unknown command /bogus; /help lists the commands"
    assert len(server.requests) == 3  # "not sent" came after /exit
    assert replay(tmp_path / "home" / "sessions", sid).identical


def test_without_a_terminal_dangerous_commands_are_denied_and_nothing_is_asked(server, tmp_path):
    (tmp_path / "sub").mkdir()
    server.script(Reply.tool_calls([("terminal", '{"command": "rm -rf sub"}')]),
                  Reply.text("Could not."))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        chat.lines("remove sub")
    assert (tmp_path / "sub").is_dir()
    assert "warn: approval: deny (default)" in chat.err.getvalue()
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert "clarify" not in offered and "delegate_task" in offered


def test_approvals_and_clarify_are_asked_inline(server, tmp_path):
    (tmp_path / "sub").mkdir()
    asked: list[Question] = []

    def asker(question: Question) -> str:
        asked.append(question)
        return "session" if question.request is not None else "blue"

    server.script(Reply.tool_calls([("terminal", '{"command": "rm -rf sub"}')]),
                  Reply.tool_calls([("clarify", '{"question": "Which colour?", '
                                                '"choices": ["red", "blue"]}')]),
                  Reply.text("Removed, and blue it is."))
    chat = Chat(_options(server, tmp_path), asker=asker)
    with chat.session:
        assert chat.lines("remove sub, then ask me") == 0
    assert not (tmp_path / "sub").exists()
    assert asked[0].request is not None and asked[0].request.command == "rm -rf sub"
    assert (asked[1].text, asked[1].choices) == ("Which colour?", ("red", "blue"))
    assert '"answer":"blue"' in server.requests[2]["messages"][-1]["content"]
    assert "approval: session" in chat.err.getvalue()


def test_a_subagent_s_progress_is_shown_under_its_parent(tmp_path):
    model = ScriptedModel(tool_calls(("delegate_task", {"goal": "count the files"})),
                          tool_calls(("terminal", {"command": "echo 3"})), "3 files.",
                          "There are 3.")
    options = ChatOptions(home=tmp_path / "home", workdir=tmp_path, overrides={
        "client": model, "clock": FakeClock(), "ids": CountingIds()})
    chat = Chat(options)
    with chat.session:
        chat.lines("how many files?")
    model.assert_complete()
    assert chat.out.getvalue().strip() == "There are 3."
    err = chat.err.getvalue().splitlines()
    assert err[0] == "  [tool] delegate_task count the files"
    nested = [line for line in err if line.startswith("    [count the files] ")]
    assert [line.split("] ", 1)[1] for line in nested[:2]] == [
        "subagent started", "[tool] terminal echo 3"]
    assert "subagent finished: text_response" in nested[-1]
    assert err.index(nested[-1]) < next(i for i, line in enumerate(err)
                                        if "delegate_task -> ok" in line)


def test_new_resume_sessions_model_and_replay(server, tmp_path):
    server.script(Reply.text("Noted: 4711."), Reply.text("Hello."), Reply.text("It was 4711."))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        chat.lines("remember 4711")
        first = chat.session.session_id
        chat.lines("/new", "hello")
        second = chat.session.session_id
        assert second != first
        chat.lines("/resume no_such_session", f"/resume {first}", "what number was it?",
                   "/sessions", "/model", "/model gpt-4o", "/replay")
        assert chat.session.session_id == first
        assert chat.session.agent.settings.model == "gpt-4o"
    last = server.requests[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == [
        "remember 4711", "what number was it?"]
    err, out = chat.err.getvalue(), chat.out.getvalue()
    assert "error: /resume: no session 'no_such_session'" in err
    assert f"resumed session {first}: 2 messages; last answer: Noted: 4711." in err
    assert first in out and second in out  # /sessions
    assert "gpt-4o-mini (openai, chat_completions)" in out  # /model
    assert "model: gpt-4o" in err
    assert f"replay of {first}: identical" in err


def test_compress_between_turns_continues_in_a_child(summarising, tmp_path):
    chat = Chat(_options(summarising, tmp_path, context_length=64_000, protect_last_n=2))
    with chat.session:
        chat.lines("/compress")
        for n in range(4):
            summarising.script(Reply.text(f"answer {n} " + "z" * 600))
            chat.lines(f"question {n} " + "q" * 500)
        parent = chat.session.session_id
        chat.lines("/compress")
        child = chat.session.session_id
    err = chat.err.getvalue()
    assert "nothing to compress yet" in err
    assert f"compressed: {parent} continues in {child}" in err and child != parent
    assert "context compressed: " in err and summarising.summaries == 1
    kinds = [e.kind for e in read_envelopes(session_path(tmp_path / "home" / "sessions",
                                                         parent))]
    assert kinds[-1] == "session_split" and "compression_requested" in kinds


def test_fork_goes_on_in_a_fork_with_another_model_and_export_writes_the_trajectory(
        server, tmp_path):
    import json
    server.script(Reply.text("Noted: 4711."), Reply.text("Four."), Reply.text("Seven."))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        chat.lines("/fork", "/export", "remember 4711", "what is 2+2?")
        origin = chat.session.session_id
        root = tmp_path / "home" / "sessions"
        cut = next(e.seq for e in read_envelopes(session_path(root, origin))
                   if e.kind == "turn_started" and e.payload["user_message"] == "what is 2+2?")
        chat.lines("/fork x y z", f"/fork {cut} model=gpt-4o", "what is 3+4?",
                   "/export trl", f"/export sharegpt {tmp_path / 'out.jsonl'}")
        fork = chat.session.session_id
    err = chat.err.getvalue()
    assert "error: /fork: nothing to fork yet" in err and "error: /export: nothing to" in err
    assert "error: /fork: usage: /fork [SEQ] [model=NAME]" in err
    assert f"forked {origin}@{cut}: now in {fork}" in err and fork != origin
    last = server.requests[-1]
    assert last["model"] == "gpt-4o"
    assert [m["content"] for m in last["messages"] if m["role"] == "user"] == [
        "remember 4711", "what is 3+4?"]  # the fork kept the first turn only
    assert replay(root, fork).identical and replay(root, origin).identical
    # Issue 25: the default path was in the working tree (the user's repository).
    assert not list(tmp_path.glob("*.trl.jsonl"))
    exported = tmp_path / "home" / "exports" / f"{fork}.trl.jsonl"
    trl = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(trl) == 1 and trl[0]["messages"][-1]["content"] == "Seven."
    shared = json.loads((tmp_path / "out.jsonl").read_text())
    assert shared["conversations"][-1]["value"].endswith("Seven.")
    assert "exported 1 sample(s) from 1 session(s) as trl" in err


def test_an_export_to_a_path_that_cannot_be_written_is_an_error_and_the_chat_goes_on(
        server, tmp_path):
    server.script(Reply.text("Four."), Reply.text("Five."))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        assert chat.lines("2+2?", f"/export sharegpt {blocker / 'out.jsonl'}", "2+3?") == 0
    assert chat.out.getvalue().splitlines() == ["Four.", "Five."]
    assert (f"error: /export: cannot write {blocker / 'out.jsonl'}: [Errno 17] File exists: "
            f"'{blocker}'") in chat.err.getvalue()


def test_a_fork_seq_that_is_a_digit_but_no_number_does_not_end_the_chat(server, tmp_path):
    server.script(Reply.text("Four."), Reply.text("Five."))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        assert chat.lines("2+2?", "/fork ² x", "2+3?") == 0  # "²".isdigit(), int("²") fails
    assert chat.out.getvalue().splitlines() == ["Four.", "Five."]
    assert "error: /fork: usage: /fork [SEQ] [model=NAME]" in chat.err.getvalue()


def test_a_fork_shows_no_earlier_answer_again_and_usage_reads_the_forked_session(
        server, tmp_path):
    server.script(Reply.text("You said: MARK-ONE"), Reply.text("You said: MARK-TWO"))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        assert chat.lines("MARK-ONE", "MARK-TWO", "/fork", "/usage") == 0
        fork = chat.session.session_id
    out = chat.out.getvalue().splitlines()
    assert out[:2] == ["You said: MARK-ONE", "You said: MARK-TWO"]
    assert out[2].startswith(f"session {fork}: ") and "tokens in all" in out[2]
    assert len(out) == 3


@pytest.mark.parametrize("words", ["abc", "gpt-4o", "3 gpt-4o", "model=", "provider=x",
                                   "3 model=a b"])
def test_a_fork_refuses_a_word_it_does_not_take(server, tmp_path, words):
    server.script(Reply.text("Four."))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        chat.lines("2+2?")
        origin = chat.session.session_id
        chat.lines(f"/fork {words}")
        assert chat.session.session_id == origin
    assert "error: /fork: usage: /fork [SEQ] [model=NAME]" in chat.err.getvalue()


def test_memory_skills_and_tools_are_listed(server, tmp_path):
    skill = tmp_path / "home" / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship the app.\n---\nSteps\n")
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        chat.lines("/memory", "/skills", "/tools", "/help")
    out = chat.out.getvalue()
    assert "memory: (empty)" in out and "user profile: (empty)" in out
    assert "deploy" in out and "Ship the app." in out
    assert "terminal" in out and "delegate_task" in out
    assert "/resume [id]" in out and "Ctrl-D exits" in out


def test_a_failed_turn_is_shown_and_the_exit_status_says_so(server, tmp_path):
    server.script(Reply.error(400, "bad request here"))
    chat = Chat(_options(server, tmp_path, max_retries=0))
    with chat.session:
        assert chat.lines("hi") == 1
    assert "error: the turn failed:" in chat.err.getvalue()


def test_mibyan_chat_reads_piped_stdin_line_by_line(server, home):
    server.script(Reply.text("Four."), Reply.text("Six."))
    env = {"OPENAI_BASE_URL": server.base_url, "MIBYAN_MODEL": "gpt-4o-mini"}
    done = mibyan(home, "chat", stdin="2+2?\n3+3?\n/usage\n", env=env)
    assert done.returncode == 0, done.stderr
    answers, usage = done.stdout.splitlines()[:2], done.stdout.splitlines()[2]
    assert answers == ["Four.", "Six."] and usage.startswith("session ")
    assert done.stderr.count(" in · ") == 2 and "Traceback" not in done.stderr
    missing = mibyan(home, "chat", "--resume", "no_such_session", stdin="hi\n", env=env)
    assert missing.returncode == 2 and "no session 'no_such_session'" in missing.stderr
    # Issue 25: a chat resumed from the command line said nothing of where it stood.
    sid = usage.split()[1].rstrip(":")
    server.script(Reply.text("Eight."))
    again = mibyan(home, "chat", "--resume", sid, stdin="4+4?\n", env=env)
    assert again.returncode == 0, again.stderr
    assert f"resuming {sid}: 4 messages; last answer: Six." in again.stderr


def test_a_price_in_config_toml_is_the_chat_s_cost_and_the_insights_cost(server, tmp_path,
                                                                         capsys):
    from pipeline.cli.main import main
    from tests.fake_openai import Usage
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[prices."gpt-4o-mini"]\ninput = 1000000\n'
                                      'output = 2000000\n')
    server.script(Reply.text("Four.", usage=Usage(3, 2)))
    chat = Chat(_options(server, tmp_path))
    with chat.session:
        chat.lines("2+2?", "/usage")
    assert " · $7.00 · 1 call" in chat.err.getvalue()  # 3 in at $1, 2 out at $2
    assert " · $7.00 · " in chat.out.getvalue().splitlines()[1]
    assert main(["--home", str(home), "insights", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost_usd"] == 7.0
    server.script(Reply.text("Six."))
    unpriced = Chat(attrs.evolve(_options(server, tmp_path), model="house-model"))
    with unpriced.session:
        unpriced.lines("3+3?")
    assert "cost n/a" in unpriced.err.getvalue()


def test_the_chat_takes_run_s_model_call_options(server, tmp_path, monkeypatch):
    from pipeline.cli.cmd_chat import options_from
    from pipeline.cli.main import _parser
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    args = _parser().parse_args([
        "--home", str(tmp_path / "home"), "chat", "--model", "gpt-4o-mini", "--base-url",
        server.base_url, "--workdir", str(tmp_path), "--no-stream", "--timeout", "5",
        "--deadline", "9", "--durability", "flush"])
    server.script(Reply.text("Four."))
    chat = Chat(options_from(args))
    with chat.session:
        agent = chat.session.agent
        assert (agent.agent_settings.timeout, agent.agent_settings.deadline) == (5.0, 9.0)
        assert agent.durability == "flush"
        assert chat.lines("2+2?") == 0
    assert not server.requests[0].get("stream") and chat.out.getvalue() == "Four.\n"


def test_a_timeout_flag_without_a_deadline_gives_three_read_timeouts(tmp_path, monkeypatch):
    from pipeline.cli.cmd_chat import options_from
    from pipeline.cli.main import _parser
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    args = _parser().parse_args([
        "--home", str(tmp_path / "home"), "chat", "--model", "gpt-4o-mini", "--base-url",
        "http://127.0.0.1:9/v1", "--workdir", str(tmp_path), "--timeout", "5"])
    chat = Chat(options_from(args))
    with chat.session:
        agent = chat.session.agent
        assert (agent.agent_settings.timeout, agent.agent_settings.deadline) == (5.0, 15.0)


def test_a_turn_paused_elsewhere_is_asked_inline_before_the_next_message(server, tmp_path):
    from pipeline.agent import Agent
    from pipeline.toolsets import builtin_tools

    (tmp_path / "sub").mkdir()
    server.script(Reply.tool_calls([("terminal", '{"command": "rm -rf sub"}')]),
                  Reply.text("Removed."), Reply.text("Yes, it is gone."))
    with Agent(model="gpt-4o-mini", base_url=server.base_url, api_key=KEY,
               home=tmp_path / "home", approvals="pause",
               tools=builtin_tools(tmp_path, toolsets=("terminal",))) as library:
        sid = library.run("remove sub").session_id
        assert library.pending_approvals
    asked: list[Question] = []
    chat = Chat(attrs.evolve(_options(server, tmp_path), session_id=sid),
                asker=lambda q: asked.append(q) or "once")
    with chat.session:
        assert chat.lines("is it gone?") == 0
    assert [q.request.command for q in asked] == ["rm -rf sub"]
    assert not (tmp_path / "sub").exists()
    assert server.requests[2]["messages"][-1] == {"role": "user", "content": "is it gone?"}
    assert replay(tmp_path / "home" / "sessions", sid).identical
