"""What ``mibyan`` prints, run as a user would (a subprocess): model and tool text with its
control characters shown escaped, not obeyed; the log keeps them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from effects.eventlog.store import read_envelopes, session_path
from tests.fake_openai import Reply
from tests.pipeline.test_cli import ROOT, ArrivalServer, clean_env, mibyan, no_traceback

KEY = "sk-cli-output-test-0123456789"
HOSTILE = "\x1b]0;pwned\x07\x1b[2Jhi\r\nthere\x9b31m\tend"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2Jhi\nthere\\x9b31m\tend"


def _env(server) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY, "MIBYAN_MODEL": "fake"}


@pytest.mark.parametrize("stream", [True, False])
def test_run_shows_control_characters_escaped_and_logs_them_as_they_came(server, home, stream):
    server.script(Reply.text(HOSTILE, piece_size=3))
    done = mibyan(home, "run", "--no-tools", *(() if stream else ("--no-stream",)), "hi",
                  env=_env(server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == SHOWN + "\n"
    sid = done.stderr.split("[session ")[1].split(" ")[0]
    replied = [e.payload for e in read_envelopes(session_path(home / "sessions", sid))
               if e.kind == "model_replied"]
    assert replied[0]["message"]["content"] == HOSTILE


def test_run_shows_a_tool_s_error_escaped(server, home, tmp_path):
    server.script(Reply.tool_calls([("read_file", '{"path": "no\\u001b[2Jfile"}')]),
                  Reply.text("done"))
    done = mibyan(home, "run", "--workdir", str(tmp_path), "hi", env=_env(server))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and "no\\x1b[2Jfile" in done.stderr


def test_chat_shows_control_characters_escaped(server, home):
    server.script(Reply.text(HOSTILE, piece_size=3))
    done = mibyan(home, "chat", "--no-tools", stdin="hi\n", env=_env(server))
    assert done.returncode == 0, done.stderr
    no_traceback(done)
    assert done.stdout == SHOWN + "\n"


BIDI = "total: \u202e01$ \u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069end"
BIDI_SHOWN = "total: \\u202e01$ \\u202a\\u202b\\u202c\\u202d\\u2066\\u2067\\u2068\\u2069end"


def test_printable_escapes_bidi_controls_and_leaves_other_text() -> None:
    """What replay, diff and fork print goes through printable too."""
    from pipeline.printable import printable
    assert printable(BIDI) == BIDI_SHOWN
    assert printable("\u05e9\u05dc\u05d5\u05dd \u200f\u00e9\u2029") == (
        "\u05e9\u05dc\u05d5\u05dd \u200f\u00e9\u2029")


def test_run_and_chat_show_bidi_controls_escaped(server, home):
    """A right-to-left override would show the text after it reversed ("$10" for "01$")."""
    server.script(Reply.text(BIDI, piece_size=3), Reply.text(BIDI))
    ran = mibyan(home, "run", "--no-tools", "hi", env=_env(server))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == BIDI_SHOWN + "\n"
    chatted = mibyan(home, "chat", "--no-tools", stdin="hi\n", env=_env(server))
    assert chatted.returncode == 0, chatted.stderr
    assert chatted.stdout == BIDI_SHOWN + "\n"


# --- mibyan chat and SIGTERM, as mibyan run ---------------------------------------------------

def _chat_in_a_call(home, server, *args: str) -> subprocess.Popen:
    """A piped chat whose first turn is waiting for the model (stdin stays open)."""
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli.main", "chat", "--no-tools", *args],
                            cwd=ROOT, env=clean_env(home, _env(server)), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write("slow question\nnot sent\n")
    proc.stdin.flush()
    assert server.arrived.wait(30), "the model call never reached the server"
    return proc


def _kinds(home, sid: str) -> list[str]:
    return [e.kind for e in read_envelopes(session_path(home / "sessions", sid))]


def test_a_sigterm_interrupts_the_chat_s_turn_cleanly_and_ends_the_chat(home):
    with ArrivalServer() as slow:
        slow.script(Reply.hang(30), Reply.text("resumed fine"))
        proc = _chat_in_a_call(home, slow)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 128 + signal.SIGTERM, err
        no_traceback(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        assert "interrupted (model call)" in err
        [sid] = [p.stem for p in (home / "sessions").glob("*.jsonl")]
        assert _kinds(home, sid)[-2:] == ["interrupted", "turn_finished"]
        again = mibyan(home, "chat", "--resume", sid, stdin="and now?\n", env=_env(slow))
        slow.assert_done()  # "not sent" was not: the chat ended with the turn
    assert again.returncode == 0, again.stderr
    assert again.stdout == "resumed fine\n" and "error" not in again.stderr


def test_resuming_a_chat_killed_mid_turn_says_the_earlier_turn_was_cut_off(home):
    with ArrivalServer() as slow:
        slow.script(Reply.hang(30), Reply.text("resumed fine"))
        proc = _chat_in_a_call(home, slow)
        proc.kill()
        proc.communicate(timeout=30)
        [sid] = [p.stem for p in (home / "sessions").glob("*.jsonl")]
        again = mibyan(home, "chat", "--resume", sid, stdin="and now?\n", env=_env(slow))
    assert again.returncode == 0, again.stderr
    assert again.stdout == "resumed fine\n"
    assert "the turn failed" not in again.stderr
    assert "the session's previous turn did not finish (the process stopped before the turn " \
           "finished)" in again.stderr


# --- a reader that leaves early (| head) ends the command quietly -----------------------------

@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from tests.sample_home import record
    home = tmp_path_factory.mktemp("pipes") / "home"
    return home, record(home)


def _into_a_closed_pipe(home, *args: str) -> subprocess.CompletedProcess:
    """``mibyan ARGS | head -0``, without the race: the pipe's reader is gone before the
    command writes anything."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "pipeline.cli.main", *args], cwd=ROOT,
                              env=clean_env(home), stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=60, check=False)
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [("sessions",), ("sql", "select * from events"),
                                  ("insights",), ("insights", "--json"), ("diff", "A", "B"),
                                  ("replay", "--all")])
def test_a_reader_that_left_ends_the_command_quietly(recorded, args):
    home, sample = recorded
    args = tuple(sample.alpha[0] if a == "A" else sample.beta if a == "B" else a for a in args)
    done = _into_a_closed_pipe(home, *args)
    assert done.stderr == "" and done.returncode == 128 + signal.SIGPIPE


# --- bad values are usage errors up front ------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    (("run", "--workdir", "/nonexistent", "hi"), "--workdir: no such directory: '/nonexistent'"),
    (("chat", "--workdir", "/nonexistent"), "--workdir: no such directory"),
    (("fork", "s", "--at", "1", "--workdir", "/nonexistent"), "--workdir: no such directory"),
    (("cron", "run", "--workdir", "/nonexistent"), "--workdir: no such directory"),
    (("run", ""), "the message is empty"),
    (("run", " \n"), "the message is empty"),
    (("run", "--max-turns", "99999999999999999999", "hi"),
     "--max-turns: must be a whole number of at most 1000000"),
    (("chat", "--max-tokens", "99999999999999999999"), "--max-tokens: must be a whole number of"),
    (("replay", "--all", "--jobs", "0"), "--jobs: must be a whole number of at least 1"),
    (("replay", "--all", "--jobs", "100000"), "--jobs: must be a whole number of at most 256"),
    (("insights", "--days", "99999999999"), "--days: must be a whole number of at most 36500"),
    (("serve", "--port", "99999"), "--port: must be a port, 0 to 65535, got '99999'"),
    (("serve", "--port", "-1"), "--port: must be a port, 0 to 65535, got '-1'"),
])
def test_bad_values_are_usage_errors_before_anything_runs(home, args, expected):
    done = mibyan(home, *args, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                    "MIBYAN_MODEL": "fake"}, stdin="")
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    no_traceback(done)
    assert not (home / "sessions").exists()


def test_a_serve_port_out_of_range_in_config_toml_is_a_usage_error(home):
    home.mkdir()
    (home / "config.toml").write_text("[serve]\nport = 99999\n")
    done = mibyan(home, "serve", "--no-auth")
    assert done.returncode == 2, done.stderr
    assert "[serve] port must be from 0 (any free port) to 65535, got 99999" in done.stderr
    no_traceback(done)
