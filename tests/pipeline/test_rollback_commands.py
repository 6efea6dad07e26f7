"""Rollback from each door: ``mibyan rollback`` and ``fork --restore-tree`` (real processes),
``/rollback`` in the chat, and ``POST /v1/sessions/{id}/rollback`` on the gateway."""

from __future__ import annotations

import io
import json
from pathlib import Path

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.chat.display import PlainDisplay
from pipeline.chat.options import ChatOptions
from pipeline.chat.piped import piped
from pipeline.chat.session import ChatSession
from pipeline.shell.replay import replay
from stages.log import events as ev
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import ArrivalServer, start_gateway
from tests.pipeline.test_cli import mibyan

KEY = "sk-cli-test-key-0123456789"


def _write(path: str, content: str) -> Reply:
    return Reply.tool_calls([("write_file", json.dumps({"path": path, "content": content}))])


def _events(home: Path, sid: str) -> list[ev.Event]:
    path = session_path(home / "sessions", sid)
    return [from_payload(e.kind, e.schema_version, e.payload) for e in read_envelopes(path)]


def test_the_cli_rolls_a_closed_session_back_and_a_fork_restores_its_tree(server, home,
                                                                          tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("one\n")
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY}
    server.script(_write("a.txt", "two\n"), Reply.text("ok"),
                  _write("b.txt", "new\n"), Reply.text("ok"))
    first = mibyan(home, "run", "--model", "fake", "--workdir", str(tree), "change a", env=env)
    assert first.returncode == 0, first.stderr
    sid = next(p.stem for p in (home / "sessions").glob("*.jsonl"))
    second = mibyan(home, "run", "--model", "fake", "--workdir", str(tree), "--resume", sid,
                    "add b", env=env)
    assert second.returncode == 0, second.stderr
    assert (tree / "a.txt").read_text() == "two\n" and (tree / "b.txt").exists()

    back = mibyan(home, "rollback", sid, "--turn", "2", env=env)
    assert back.returncode == 0, back.stderr
    assert "to before turn 2: 0 file(s) restored, 1 removed" in back.stdout
    assert not (tree / "b.txt").exists() and (tree / "a.txt").read_text() == "two\n"
    back = mibyan(home, "rollback", sid, env=env)  # the latest checkpoint: turn 2's again
    assert back.returncode == 0 and "before turn 2" in back.stdout
    missing = mibyan(home, "rollback", sid, "--turn", "7", env=env)
    assert missing.returncode != 0 and "no checkpoint of turn 7" in missing.stderr
    assert "Traceback" not in missing.stderr

    # A fork from before turn 1 puts the tree back as it was then.
    at = next(i for i, e in enumerate(_events(home, sid)) if isinstance(e, ev.TurnStarted))
    fork = mibyan(home, "fork", sid, "--at", str(at), "--restore-tree", "--workdir", str(tree),
                  env=env)
    assert fork.returncode == 0, fork.stderr
    assert "to before turn 1: 1 file(s) restored, 0 removed" in fork.stdout
    assert (tree / "a.txt").read_text() == "one\n"
    assert replay(home / "sessions", sid).identical


def test_slash_rollback_in_the_chat_records_it_in_the_session(server, tmp_path):
    # The home lies inside the working tree here: it is never snapshotted or rolled back.
    options = ChatOptions(home=tmp_path / "home", workdir=tmp_path, model="gpt-4o-mini",
                          base_url=server.base_url, overrides={"api_key": KEY})
    out, err = io.StringIO(), io.StringIO()
    server.script(_write("notes.md", "draft\n"), Reply.text("written"))
    with ChatSession(options, PlainDisplay(out, err)) as session:
        piped(session, ["write notes\n", "/rollback x\n", "/rollback 5\n", "/rollback\n"])
        sid = session.session_id
    assert not (tmp_path / "notes.md").exists()
    lines = err.getvalue().splitlines()
    usage = "error: /rollback: usage: /rollback [TURN]"
    assert any(line.startswith(usage) for line in lines), lines
    assert "error: nothing rolled back: no checkpoint to go back to" in lines
    assert any(line.startswith("rolled back to before turn 1: 0 file(s) restored, 1 removed")
               for line in lines), lines
    events = _events(tmp_path / "home", sid)
    assert [e.error is None for e in events if isinstance(e, ev.TreeRestored)] == [False, True]
    assert replay(tmp_path / "home" / "sessions", sid).identical


def test_the_gateway_rolls_a_session_back(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "keep.txt").write_text("kept\n")
    with ArrivalServer() as upstream:
        gateway_run = start_gateway(upstream, tmp_path / "home", workdir)
        gateway = next(gateway_run)
        try:
            upstream.script(_write("keep.txt", "overwritten\n"), Reply.text("done"))
            with gateway.client() as client, gateway.client("bob") as bob:
                sid = client.post("/v1/sessions").json()["id"]
                client.post(f"/v1/sessions/{sid}/messages", json={"content": "change it"})
                assert (workdir / "keep.txt").read_text() == "overwritten\n"
                for body, param in (({"turn": "1"}, "turn"), ({"turn": 0}, "turn"),
                                    ({"at": 1}, "at"), ({"turn": 4}, "turn")):
                    refused = client.post(f"/v1/sessions/{sid}/rollback", json=body)
                    assert refused.status_code == 400, body
                    assert refused.json()["error"]["param"] == param
                assert bob.post(f"/v1/sessions/{sid}/rollback", json={}).status_code == 404
                done = client.post(f"/v1/sessions/{sid}/rollback", json={"turn": 1})
                assert done.status_code == 200, done.text
                answer = done.json()
                assert (answer["object"], answer["turn"], answer["restored"]) == (
                    "session.rollback", 1, 1)
                assert str(workdir) not in done.text
            assert (workdir / "keep.txt").read_text() == "kept\n"
            gateway.assert_every_session_replays()
        finally:
            gateway_run.close()
        upstream.assert_done()
