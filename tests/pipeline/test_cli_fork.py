"""``mibyan replay [--all]``, ``mibyan fork`` and ``mibyan diff``, run as a user would."""

from __future__ import annotations

from effects.eventlog.store import SessionLog, read_envelopes, session_path
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.test_cli import mibyan


def _run(home, server, message: str, answer: str) -> str:
    server.script(Reply.text(answer))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-fork-0123456789"}
    done = mibyan(home, "run", "--model", "fake", "--no-tools", message, env=env)
    assert done.returncode == 0, done.stderr
    return done.stderr.split("[session ")[1].split(" ")[0]


def _rewrite(home, session_id: str, seq: int, **changes) -> None:
    """Change one record's payload and chain the log again (a log an older mibyan wrote)."""
    path = session_path(home / "sessions", session_id)
    records = list(read_envelopes(path))
    path.unlink()
    with SessionLog.open(home / "sessions", session_id, durability="flush") as log:
        for e in records:
            payload = {**e.payload, **changes} if e.seq == seq else e.payload
            log.append(e.kind, e.schema_version, payload, e.recorded_at)


def test_fork_diff_sessions_and_replay_all(server, home):
    sid = _run(home, server, "hello", "first answer")
    at = next(e.seq for e in read_envelopes(session_path(home / "sessions", sid))
              if e.kind == "model_requested")
    server.script(Reply.text("forked answer"))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-fork-0123456789"}
    forked = mibyan(home, "fork", sid, "--at", str(at), "--model", "other",
                    "--set", "max_tokens=64", env=env)
    assert forked.returncode == 0, forked.stderr
    first, answer = forked.stdout.splitlines()
    assert first.startswith(f"forked {sid} at seq {at}: ") and answer == "forked answer"
    fid = first.rsplit(" ", 1)[1]
    assert server.requests[-1]["model"] == "other"

    listed = mibyan(home, "sessions")
    row = next(line for line in listed.stdout.splitlines() if line.startswith(fid))
    assert row.split()[-2:] == [f"{sid}@{at}", "signed"]  # then the log's signature state

    compared = mibyan(home, "diff", sid, fid)
    assert compared.returncode == 0, compared.stderr
    lines = compared.stdout.splitlines()
    assert f"{fid} is a fork of {sid} at seq {at}" in lines
    assert f"common prefix: {at} records" in lines
    answer_row = next(line for line in lines if line.strip().startswith("answer"))
    assert "first answer" in answer_row and "| forked answer" in answer_row
    models = next(line for line in lines if line.strip().startswith("models"))
    assert "fake" in models and "| other" in models

    everything = mibyan(home, "replay", "--all")
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.startswith("2 sessions, ") and "0 divergences" in everything.stdout


def test_replay_names_the_first_divergence_field_by_field(server, home):
    good = _run(home, server, "hi", "fine")
    bad = _run(home, server, "hi again", "also fine")
    seq = next(e.seq for e in read_envelopes(session_path(home / "sessions", bad))
               if e.kind == "model_requested")
    _rewrite(home, bad, seq, message_count=9)

    one = mibyan(home, "replay", bad)
    assert one.returncode == 1
    assert one.stdout.splitlines()[:2] == [
        f"diverged at seq {seq} in stage request",
        "  model_requested.message_count: expected 9, produced 1"]
    assert mibyan(home, "replay", good).stdout.startswith("identical (")

    everything = mibyan(home, "replay", "--all")
    assert everything.returncode == 1
    assert f"{bad}: diverged at seq {seq} in stage request" in everything.stdout
    assert good not in everything.stdout
    assert "2 sessions, " in everything.stdout and "1 divergence," in everything.stdout

    pooled = mibyan(home, "replay", "--all", "--jobs", "2")  # the same, on two processes
    assert pooled.returncode == 1
    assert pooled.stdout.splitlines()[:-1] == everything.stdout.splitlines()[:-1]
    assert pooled.stdout.splitlines()[-1].startswith("2 sessions, ")


def test_replay_all_skips_and_names_the_empty_logs_of_earlier_versions(server, home):
    sid = _run(home, server, "hi", "fine")
    empty = "20250101_000000_abcdef"
    session_path(home / "sessions", empty).write_bytes(b"")
    everything = mibyan(home, "replay", "--all")
    assert everything.returncode == 0, everything.stdout
    assert everything.stdout.startswith("1 session, ") and "0 divergences" in everything.stdout
    assert "1 empty log skipped" in everything.stdout
    assert f"{empty}: empty log (no record), skipped" in everything.stderr
    assert sid not in everything.stderr


def test_bad_replay_fork_and_diff_arguments_are_usage_errors(server, home):
    sid = _run(home, server, "hello", "an answer")
    count = sum(1 for _ in read_envelopes(session_path(home / "sessions", sid)))
    cases = [
        (("replay",), "name one SESSION to replay, or --all"),
        (("replay", sid, "--all"), "name one SESSION to replay, or --all"),
        (("fork", sid, "--at", str(count + 1)), f"the session has {count} records"),
        (("fork", sid, "--at", "0"), "out of range"),
        (("fork", sid, "--at", "two"), "argument --at: invalid int value: 'two'"),
        (("fork", "no_such_session", "--at", "1"), "no session 'no_such_session'"),
        (("fork", sid, "--at", "2", "--set", "colour=red"), "unknown settings: colour"),
        (("fork", sid, "--at", "2", "--set", "nonsense"), "--set takes key=value"),
        (("fork", sid, "--at", "2", "--set", "base_url=ftp://x"),
         "base_url must be an http:// or https:// URL with a host, got 'ftp://x'"),
        (("fork", sid, "--at", "2", "--set", "model="), "model must be a name, got ''"),
        (("run", "--model", "fake", "--base-url", "ftp://x", "hi"),
         "base_url must be an http:// or https:// URL"),
        (("run", "--resume", sid, "--base-url", "ftp://x", "hi"),
         "base_url must be an http:// or https:// URL"),
        (("diff", sid, "no_such_session"), "no session 'no_such_session'"),
    ]
    for args, message in cases:
        done = mibyan(home, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    assert sorted(p.stem for p in (home / "sessions").glob("*.jsonl")) == [sid]


def test_fork_and_diff_print_the_model_s_control_characters_escaped(server, home):
    sid = _run(home, server, "hello", "first\x1b[2J")
    at = next(e.seq for e in read_envelopes(session_path(home / "sessions", sid))
              if e.kind == "model_requested")
    server.script(Reply.text("forked\x1b]0;pwned\x07"))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-fork-0123456789"}
    forked = mibyan(home, "fork", sid, "--at", str(at), env=env)
    assert forked.returncode == 0, forked.stderr
    first, answer = forked.stdout.splitlines()
    assert answer == "forked\\x1b]0;pwned\\x07"
    compared = mibyan(home, "diff", sid, first.rsplit(" ", 1)[1])
    assert compared.returncode == 0, compared.stderr
    assert "\x1b" not in compared.stdout and "first\\x1b[2J" in compared.stdout


def test_a_fork_resumed_from_the_command_line_goes_on_with_its_own_model(server, home):
    sid = _run(home, server, "hello", "first answer")
    end = sum(1 for _ in read_envelopes(session_path(home / "sessions", sid)))
    forked = mibyan(home, "fork", sid, "--at", str(end), "--model", "forked-model",
                    env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-fork-0"})
    assert forked.returncode == 0, forked.stderr
    fid = forked.stdout.split(": ")[1].strip()
    server.script(Reply.text("goes on"))
    # MIBYAN_MODEL names the model of a new session; a resumed one keeps its own.
    resumed = mibyan(home, "run", "--no-tools", "--resume", fid, "and now?",
                     env={"OPENAI_BASE_URL": server.base_url, "MIBYAN_MODEL": "fake"})
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "goes on\n"
    assert server.requests[-1]["model"] == "forked-model"
    assert "embedded local model" not in resumed.stderr


def test_sessions_shows_a_fork_under_its_own_model_and_a_broken_log_as_broken(server, home):
    sid = _run(home, server, "hello", "first answer")
    at = next(e.seq for e in read_envelopes(session_path(home / "sessions", sid))
              if e.kind == "model_requested")
    server.script(Reply.text("forked answer"))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-fork-0123456789"}
    forked = mibyan(home, "fork", sid, "--at", str(at), "--model", "other", env=env)
    assert forked.returncode == 0, forked.stderr
    fid = forked.stdout.splitlines()[0].rsplit(" ", 1)[1]
    broken = _run(home, server, "hi", "an answer")
    path = session_path(home / "sessions", broken)
    path.write_bytes(path.read_bytes().replace(b'"an answer"', b'"an ANSWER"'))
    assert mibyan(home, "log", "verify", broken).stdout.startswith("BROKEN")

    listed = mibyan(home, "sessions")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    header = listed.stdout.splitlines()[0].split()
    model, status = header.index("model"), header.index("status")
    assert rows[sid][model] == "fake" and rows[fid][model] == "other"
    assert rows[broken][status] == "broken" and rows[sid][status] != "broken"
    assert f"{broken}: " in listed.stderr


def test_a_fork_goes_on_with_the_settings_in_force_at_the_fork_point(server, home):
    """The fork's client comes from the settings the prefix ends with, not from the origin's
    first record: a session resumed on another provider, forked after that, calls that
    provider with its key; so does a fork of a fork (whose first record is the origin's)."""
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-openai-0123456789",
           "OPENROUTER_API_KEY": "sk-router-0123456789"}
    sid = _run(home, server, "hello", "first answer")
    with FakeOpenAIServer() as later:
        later.script(Reply.text("second answer"))
        resumed = mibyan(home, "run", "--no-tools", "--resume", sid, "--provider", "openrouter",
                         "--model", "later-model", "--base-url", later.base_url, "and now?",
                         env=env)
        assert resumed.returncode == 0, resumed.stderr
        at = [e.seq for e in read_envelopes(session_path(home / "sessions", sid))
              if e.kind == "model_requested"][-1]
        later.script(Reply.text("forked answer"))
        forked = mibyan(home, "fork", sid, "--at", str(at), env=env)
        assert forked.returncode == 0, forked.stderr
        assert forked.stdout.splitlines()[1] == "forked answer"
        assert [r["model"] for r in later.requests] == ["later-model", "later-model"]
        assert [h["authorization"] for h in later.request_headers] == \
            ["Bearer sk-router-0123456789"] * 2
        fid = forked.stdout.splitlines()[0].rsplit(" ", 1)[1]

        end = sum(1 for _ in read_envelopes(session_path(home / "sessions", fid)))
        refork = mibyan(home, "fork", fid, "--at", str(end), "--model", "fork-model", env=env)
        assert refork.returncode == 0, refork.stderr
        rid = refork.stdout.split(": ")[1].strip()
        later.script(Reply.text("third answer"))
        more = mibyan(home, "run", "--no-tools", "--resume", rid, "more?", env=env)
        assert more.returncode == 0, more.stderr
        at = [e.seq for e in read_envelopes(session_path(home / "sessions", rid))
              if e.kind == "model_requested"][-1]
        later.script(Reply.text("last answer"))
        again = mibyan(home, "fork", rid, "--at", str(at), env=env)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines()[1] == "last answer"
        assert [r["model"] for r in later.requests][-2:] == ["fork-model", "fork-model"]
        assert later.request_headers[-1]["authorization"] == "Bearer sk-router-0123456789"
    assert len(server.requests) == 1


def test_fork_shows_the_tools_it_runs_and_the_usage_of_the_turn_it_goes_on_with(
        server, home, tmp_path):
    # Issue 25: a fork that went on printed its answer alone, no tool lines, no usage.
    server.script(Reply.text("first answer"))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-cli-fork-0123456789"}
    done = mibyan(home, "run", "--model", "fake", "--workdir", str(tmp_path), "hello", env=env)
    sid = done.stderr.split("[session ")[1].split(" ")[0]
    at = next(e.seq for e in read_envelopes(session_path(home / "sessions", sid))
              if e.kind == "model_requested")
    server.script(Reply.tool_calls([("read_file", '{"path": "notes.txt"}')]),
                  Reply.text("read it"))
    (tmp_path / "notes.txt").write_text("n")
    forked = mibyan(home, "fork", sid, "--at", str(at), "--workdir", str(tmp_path), env=env)
    assert forked.returncode == 0, forked.stderr
    assert "[tool] read_file notes.txt -> ok" in forked.stderr
    assert "| 2 calls |" in forked.stderr and "[session " in forked.stderr
