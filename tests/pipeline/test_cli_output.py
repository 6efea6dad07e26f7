"""What ``mibyan`` prints, run as a user would (a subprocess): model and tool text with its
control characters shown escaped, not obeyed; the log keeps them."""

from __future__ import annotations

import pytest

from effects.eventlog import read_envelopes, session_path
from tests.fake_openai import Reply
from tests.pipeline.test_cli import mibyan, no_traceback

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
