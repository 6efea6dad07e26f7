"""Trajectory export: named examples of each format, lineages, provenance, filters, outputs
and the command line."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from effects.eventlog.envelope import session_path, strict_lines
from effects.eventlog.keys import keyring_of
from pipeline.agent import Agent
from pipeline.cli.main import main
from pipeline.export.exporter import ExportFilters, answered, export_sessions
from pipeline.export.formats import Sample, sharegpt
from pipeline.export.trajectory import Entry, read_lineage
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from stages.errors import UsageError
from stages.log.messages import Message, ToolCall
from tests.pipeline.export_sessions import (
    GITHUB_TOKEN,
    KEY,
    calls_session,
    compressed_session,
    lookup,
    simple_session,
    tool_session,
)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _export(home: Path, fmt: str, **kw) -> list[dict]:
    out = home / f"out.{fmt}.jsonl"
    kw.setdefault("provenance", "inline")  # these tests read it; OpenAI's default has none
    export_sessions(home / "sessions", out, fmt=fmt, **kw)
    return _rows(out)


@pytest.fixture
def tools_home(tmp_path) -> Path:
    tool_session(tmp_path)
    return tmp_path


def test_sharegpt_is_in_the_form_hermes_agent_writes(tools_home) -> None:
    [row] = _export(tools_home, "sharegpt")
    turns = row["conversations"]
    assert [t["from"] for t in turns] == ["system", "human", "gpt", "tool", "gpt", "tool", "gpt",
                                         "human", "gpt"]
    assert "<tools>" in turns[0]["value"] and '"name": "lookup"' in turns[0]["value"]
    first = turns[2]["value"]
    assert first.startswith("<think>\nTwo sums; run them together.\n</think>\nLet me add.\n")
    assert first.count("<tool_call>") == 2
    assert '{"name": "add", "arguments": {"a": 1, "b": 2}}' in first
    # both results of the step in one tool turn, content parsed when it is JSON
    assert turns[3]["value"].count("<tool_response>") == 2
    assert '"tool_call_id": "call_a", "name": "add", "content": "3"' in turns[3]["value"]
    assert '"content": {"name": "ada"' in turns[5]["value"]
    assert turns[4]["value"].startswith("<think>\n</think>\n<tool_call>")  # no reasoning: empty
    assert turns[8]["value"] == "<think>\n</think>\nYou are welcome."
    assert row["model"] == "model-a" and row["completed"] is True
    assert row["timestamp"].startswith("2026-01-01T00:00:00")


def test_the_sharegpt_system_turn_is_hermes_agent_s_own(tools_home) -> None:
    """hermes-agent's trajectory preamble, word for word: the tools as one JSON array, the
    FunctionCall schema and the example as it writes them (Python-style quotes)."""
    [row] = _export(tools_home, "sharegpt")
    system = row["conversations"][0]["value"]
    head, rest = system.split("<tools>\n", 1)
    listed, tail = rest.split("\n</tools>\n", 1)
    assert head.endswith("<tool_response> </tool_response> XML tags. Here are the available "
                         "tools:\n")
    assert [t["name"] for t in json.loads(listed)] == ["add", "lookup"]
    assert all(t["required"] is None for t in json.loads(listed))
    assert tail == (
        "For each function call return a JSON object, with the following pydantic model json "
        "schema for each:\n"
        "{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': 'Name', "
        "'type': 'string'}, 'arguments': {'title': 'Arguments', 'type': 'object'}}, "
        "'required': ['name', 'arguments']}\n"
        "Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n"
        "Example:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n"
        "</tool_call>")


def test_sharegpt_gpt_turns_are_trimmed_as_hermes_agent_trims_them() -> None:
    """Blank reasoning is no reasoning, blank text no text, and no turn ends in whitespace."""
    def gpt(message: Message) -> str:
        entry = Entry(message=message, session_id="s", seq=0)
        sample = Sample(entries=(entry,), system_prompt=None, tools=(), provenance={},
                        completed=True, model=None, timestamp=None)
        return sharegpt(sample)["conversations"][1]["value"]
    assert gpt(Message(role="assistant", content="Done.\n", reasoning=" \n")) == (
        "<think>\n</think>\nDone.")
    call = ToolCall(id="c", name="t", arguments="{}")
    assert gpt(Message(role="assistant", content="\n", tool_calls=(call,))) == (
        '<think>\n</think>\n<tool_call>\n{"name": "t", "arguments": {}}\n</tool_call>')


def test_openai_has_tools_weights_and_no_reasoning(tools_home) -> None:
    [row] = _export(tools_home, "openai")
    messages = row["messages"]
    assert messages[0]["role"] == "system"
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "tool", "tool", "assistant",
                                                 "tool", "assistant", "user", "assistant"]
    assert all(m["weight"] == 1 for m in messages if m["role"] == "assistant")
    assert all("weight" not in m for m in messages if m["role"] != "assistant")
    assert messages[2]["tool_calls"][0] == {
        "id": "call_a", "type": "function",
        "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}
    assert not any("reasoning" in json.dumps(m) for m in messages)
    assert row["parallel_tool_calls"] is True
    assert [t["function"]["name"] for t in row["tools"]] == ["add", "lookup"]


def test_trl_has_object_arguments_and_reasoning_content(tools_home) -> None:
    [row] = _export(tools_home, "trl")
    assistant = row["messages"][2]
    assert assistant["reasoning_content"] == "Two sums; run them together."
    assert assistant["tool_calls"][1]["function"]["arguments"] == {"a": 2, "b": 2}
    tool = row["messages"][3]
    assert tool == {"role": "tool", "name": "add", "tool_call_id": "call_a", "content": "3"}
    assert row["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]


def test_provenance_names_the_log_range_its_hash_and_who_served(tools_home) -> None:
    [row] = _export(tools_home, "openai")
    p = row["provenance"]
    [span] = p["spans"]
    path = session_path(tools_home / "sessions", span["session_id"])
    with open(path, "rb") as fh:
        lines = list(strict_lines(fh, span["session_id"], path, keyring_of(path.parent)))
    assert (span["first_seq"], span["last_seq"]) == (0, len(lines) - 1)
    assert span["log_hash"] == lines[-1].digest
    assert [t["models"] for t in p["turns"]] == [["scripted-1"], ["scripted"]]
    assert all(t["completed"] and not t["fallback"] for t in p["turns"])
    assert p["compressions"] == [] and p["approvals"] == [] and p["unanswered_calls"] == []
    assert p["redactions"] == [1, 6]  # the pasted key, the looked-up token


def test_ordinary_dots_and_stars_are_no_redaction_mark(tmp_path) -> None:
    simple_session(tmp_path, "Please...wait, ***really*** wait", "Loading...done: v1.2.3...v2.0")
    for fmt in ("sharegpt", "openai", "trl"):
        [row] = _export(tmp_path, fmt)
        assert row["provenance"]["redactions"] == [], fmt


def login(user: str, password: str) -> str:
    """Log in.

    Args:
        user: Who.
        password: Their password.
    """
    return f"welcome, {user}"


def test_a_password_in_tool_arguments_is_a_redaction_mark(tmp_path) -> None:
    """The log holds the password's mask inside the arguments' JSON text; its kept head and
    tail read as words, the field's name says what it is."""
    model = ScriptedModel(
        tool_calls(("login", {"user": "ada", "password": "correct-horse-battery-staple"})),
        "Done.")
    with Agent(client=model, tools=[login], clock=FakeClock(), ids=CountingIds(),
               home=tmp_path, model="m", stream=False) as agent:
        agent.chat("Log in as Ada, please...wait, as Ada.")
    for fmt, at in (("openai", [2]), ("trl", [2]), ("sharegpt", [2])):
        [row] = _export(tmp_path, fmt)
        assert row["provenance"]["redactions"] == at, fmt
    assert "correc...aple" in json.dumps(row)


def test_secrets_never_reach_an_export(tools_home) -> None:
    for fmt in ("sharegpt", "openai", "trl"):
        _export(tools_home, fmt)
        text = (tools_home / f"out.{fmt}.jsonl").read_text()
        assert KEY not in text and GITHUB_TOKEN not in text


def test_a_secret_the_log_kept_is_redacted_on_export(tmp_path) -> None:
    simple_session(tmp_path, "my door code is hunter2-hunter2-hunter2", "noted")
    out = tmp_path / "out.jsonl"
    report = export_sessions(tmp_path / "sessions", out, fmt="trl",
                             secrets=["hunter2-hunter2-hunter2"])
    assert "hunter2-hunter2-hunter2" not in out.read_text()
    assert report.redacted == 1
    assert _rows(out)[0]["provenance"]["redacted_on_export"] == 1


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_a_secret_is_redacted_in_every_place_and_every_format(tmp_path) -> None:
    """System prompt, user text, tool-call arguments and tool results: also where a format
    writes them as JSON inside a string (a quote or backslash in the secret is escaped
    there, so the plain secret is not what the text holds)."""
    secret = 'Tr0ub4dor"&3\\horse'
    scripted = ScriptedModel(tool_calls(("lookup", {"name": secret})), f"found {secret}")
    with Agent(client=scripted, tools=[lookup], clock=FakeClock(), ids=CountingIds(),
               home=tmp_path, model="model-c", stream=False) as agent:
        agent.run(f"look up {secret}", f"the vault word is {secret}")
    escaped = json.dumps(secret)[1:-1]
    for fmt in ("sharegpt", "openai", "trl"):
        [row] = _export(tmp_path, fmt, secrets=[secret])
        leaks = [s for s in _strings(row) if secret in s or escaped in s]
        assert leaks == [], fmt


def test_a_credential_label_s_key_from_the_environment_is_redacted(tmp_path) -> None:
    simple_session(tmp_path, "the word is correcthorsebatterystaple", "ok")
    out = tmp_path / "out.jsonl"
    export_sessions(tmp_path / "sessions", out, env={"OPENAI_API_KEY": "correcthorsebattery"})
    assert "correcthorsebattery" not in out.read_text()


def test_a_compressed_session_exports_stitched_or_as_segments(tmp_path) -> None:
    chain = compressed_session(tmp_path)
    assert len(chain) >= 3
    [whole] = _export(tmp_path, "openai")
    roles = [m["role"] for m in whole["messages"][1:]]
    assert roles == ["user", "assistant"] * 8
    assert [m["content"].split()[0] for m in whole["messages"][1::2]] == ["question"] * 8
    p = whole["provenance"]
    assert [s["session_id"] for s in p["spans"]] == chain
    assert len(p["compressions"]) == len(chain) - 1
    assert all(c["after_tokens"] < c["before_tokens"] for c in p["compressions"])
    segments = _export(tmp_path, "openai", lineage="segments")
    assert [s["provenance"]["segment"] for s in segments] == list(range(len(chain)))
    # after a compression the carried-over context is there, but not trained on
    later = segments[1]["messages"]
    assert any("summary" in (m["content"] or "") for m in later)
    weights = [m["weight"] for m in later if m["role"] == "assistant"]
    assert 0 in weights and weights[-1] == 1
    assert segments[1]["provenance"]["compressions"][0]["session_id"] == chain[0]
    lineage = read_lineage(tmp_path / "sessions", chain[0])
    assert sum(1 for e in lineage.stitched if not e.inherited) == 16


@pytest.mark.parametrize("history", [None, [{"role": "user", "content": "earlier"},
                                             {"role": "assistant", "content": "noted"}]])
def test_a_compression_s_index_is_where_the_compressed_context_starts(tmp_path,
                                                                      history) -> None:
    """Messages a session began with (a loaded history) are part of the stitched whole, so
    they count for where each compression falls in it."""
    chain = compressed_session(tmp_path, history=history)
    lineage = read_lineage(tmp_path / "sessions", chain[0])
    order = [(chain.index(e.session_id), e.seq) for e in lineage.stitched]
    assert lineage.compressions
    for c in lineage.compressions:
        at = (chain.index(c.session_id), c.seq)
        assert order[c.message_index - 1] < at < order[c.message_index]


def _replies(row: dict, fmt: str) -> list[tuple[str, int]]:
    """Each reply's text and weight (a ShareGPT reply's text after its think block)."""
    if fmt == "sharegpt":
        return [(t["value"].split("</think>\n")[-1], t["weight"])
                for t in row["conversations"] if t["from"] == "gpt"]
    return [(m["content"], m["weight"]) for m in row["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "trl"])
def test_a_fork_trains_only_on_what_it_added(tmp_path, fmt) -> None:
    """A fork's log repeats its origin's records; those replies are the origin's (exported
    with it), context in the fork: weight 0 there, in every format."""
    scripted = ScriptedModel("one", "two", "three")
    with Agent(client=scripted, clock=FakeClock(), ids=CountingIds(), home=tmp_path,
               model="model-c", stream=False) as agent:
        agent.chat("first")
        agent.chat("second")
        origin = agent.session_id
        assert origin is not None
        with agent.fork(origin) as fork:
            fork.chat("third")
            forked = fork.session_id
    rows = {r["provenance"]["session_id"]: r for r in _export(tmp_path, fmt)}
    weights = {sid: _replies(row, fmt) for sid, row in rows.items()}
    assert weights == {origin: [("one", 1), ("two", 1)],
                       forked: [("one", 0), ("two", 0), ("three", 1)]}


@pytest.mark.parametrize(("ids", "results", "missing", "kept"), [
    (("a", "b"), ("a", "z"), ("b",), ["c0"]),  # b never answered; z answers nothing
    # some servers give every call of a reply the same id: each call keeps one result
    (("call_0",) * 3, ("call_0", "call_0"), ("call_0",), ["c0", "c1"]),
])
def test_unanswered_calls_are_taken_out_and_orphan_results_dropped(ids, results, missing,
                                                                   kept) -> None:
    calls = tuple(ToolCall(id=i, name=f"c{n}", arguments="{}") for n, i in enumerate(ids))
    messages = [Message(role="user", content="go"),
                Message(role="assistant", content=None, tool_calls=calls),
                *(Message(role="tool", content="ok", tool_call_id=i, name="t") for i in results),
                Message(role="assistant", content="done")]
    out, taken = answered(Entry(message=m, session_id="s", seq=0) for m in messages)
    assert taken == missing
    assert [e.message.role for e in out] == ["user", "assistant", *["tool"] * len(kept),
                                             "assistant"]
    assert [c.name for c in out[1].message.tool_calls] == kept


def test_filters_choose_the_sessions(tmp_path) -> None:
    tool_session(tmp_path)
    compressed_session(tmp_path)
    calls_session(tmp_path)
    simple_session(tmp_path, "hi", "hello", model="model-z", task_id="task-7")
    root = tmp_path / "sessions"

    def chosen(**kw) -> list[str]:
        report = export_sessions(root, tmp_path / "x.jsonl", filters=ExportFilters(**kw))
        return sorted(report.session_ids)

    everything = ["calls_0001", "long_0001", "simple_0001", "tools_0001"]
    assert chosen() == everything
    assert chosen(completed_only=True) == everything
    assert chosen(model="model-z") == ["simple_0001"]
    assert chosen(model="scripted-1") == ["tools_0001"]
    assert chosen(no_compression=True) == ["calls_0001", "simple_0001", "tools_0001"]
    assert chosen(min_turns=2) == ["long_0001", "tools_0001"]
    assert chosen(max_turns=1) == ["calls_0001", "simple_0001"]
    assert chosen(min_turns=3, max_turns=8) == ["long_0001"]
    assert chosen(tool="lookup") == ["tools_0001"]
    assert chosen(tool="add") == ["calls_0001", "tools_0001"]
    assert chosen(task_id="task-7") == ["simple_0001"]
    assert chosen(no_fallback=True) == everything
    assert chosen(since=dt.date(2026, 1, 1), until=dt.date(2026, 1, 1)) == everything
    assert chosen(since=dt.date(2026, 1, 2)) == []
    assert chosen(until=dt.date(2025, 12, 31)) == []


@pytest.fixture
def los_angeles(monkeypatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_since_and_until_are_utc_days_whatever_the_machine_s_zone(tmp_path,
                                                                  los_angeles) -> None:
    """The logs' clock is UTC (and so are the days of ``mibyan insights``): the same logs
    and dates choose the same sessions on any machine."""
    del los_angeles
    sid = simple_session(tmp_path, "hi", "hello")  # 2026-01-01 00:00 UTC, 16:00 the day before
    report = export_sessions(tmp_path / "sessions", tmp_path / "x.jsonl", filters=ExportFilters(
        since=dt.date(2026, 1, 1), until=dt.date(2026, 1, 1)))
    assert report.session_ids == (sid,)


def test_any_session_of_a_lineage_chooses_it(tmp_path) -> None:
    """The id mibyan shows after a compression is the child's: it names its lineage too."""
    chain = compressed_session(tmp_path)
    simple_session(tmp_path, "hi", "hello")
    for sid in (chain[0], chain[-1]):
        report = export_sessions(tmp_path / "sessions", tmp_path / "x.jsonl",
                                 filters=ExportFilters(session_ids=(sid,)))
        assert report.session_ids == (chain[0],)


def test_a_session_that_did_not_complete_is_left_out_by_completed_only(tmp_path) -> None:
    from pipeline.agent import Agent
    from pipeline.testing import CountingIds, FakeClock, ScriptedModel
    from stages.errors import ProviderHTTPError
    model = ScriptedModel(ProviderHTTPError("bad request", status=400))
    with Agent(client=model, clock=FakeClock(), ids=CountingIds(prefix="broken"), home=tmp_path,
               model="m", stream=False, max_retries=0) as agent:
        assert agent.run("hi").failed
    simple_session(tmp_path, "hi", "hello")
    report = export_sessions(tmp_path / "sessions", tmp_path / "x.jsonl",
                             filters=ExportFilters(completed_only=True))
    assert report.session_ids == ("simple_0001",)


def test_parquet_output_reads_back(tools_home) -> None:
    import pyarrow.parquet as pq
    out = tools_home / "out.parquet"
    report = export_sessions(tools_home / "sessions", out, fmt="trl")
    assert report.output == "parquet"
    [row] = pq.read_table(out).to_pylist()
    assert row["messages"][2]["reasoning_content"] == "Two sums; run them together."


@pytest.mark.parametrize(("kw", "named"), [({"fmt": "alpaca"}, "format 'alpaca'"),
                                           ({"lineage": "woven"}, "lineage mode 'woven'"),
                                           ({"output": "csv"}, "output 'csv'")])
def test_bad_choices_are_usage_errors(tmp_path, kw, named) -> None:
    with pytest.raises(UsageError, match=named):
        export_sessions(tmp_path / "sessions", tmp_path / "x.jsonl", **kw)


def test_bad_filters_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="min_turns"):
        ExportFilters(min_turns=-1)


def test_no_sessions_writes_an_empty_file(tmp_path) -> None:
    report = export_sessions(tmp_path / "sessions", tmp_path / "x.jsonl")
    assert report.samples == 0 and (tmp_path / "x.jsonl").read_text() == ""


def test_mibyan_export_writes_the_file(tools_home, capsys) -> None:
    compressed_session(tools_home)
    out = tools_home / "cli.jsonl"
    code = main(["--home", str(tools_home), "export", str(out), "--format", "openai",
                 "--no-compression", "--tool", "lookup", "--since", "2026-01-01"])
    assert code == 0
    assert "exported 1 sample(s) from 1 session(s) as openai (jsonl)" in capsys.readouterr().out
    assert len(_rows(out)) == 1
    code = main(["--home", str(tools_home), "export", str(out), "--lineage", "segments"])
    assert code == 0 and len(_rows(out)) == 4


def test_mibyan_export_rejects_a_bad_date(tools_home, capsys) -> None:
    code = main(["--home", str(tools_home), "export", "x.jsonl", "--since", "yesterday"])
    assert code == 2
    assert "--since must be a date" in capsys.readouterr().err


def test_a_corrupt_log_is_skipped_and_named_the_rest_exported(tmp_path, capsys) -> None:
    good = simple_session(tmp_path, "hello", "fine", ids=CountingIds(prefix="good"))
    bad = simple_session(tmp_path, "hi", "also fine", ids=CountingIds(prefix="bad"))
    path = session_path(tmp_path / "sessions", bad)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:-2], b'{"not": "a record"}\n', lines[-1]]))
    out = tmp_path / "out.jsonl"
    report = export_sessions(tmp_path / "sessions", out, fmt="openai")
    assert report.session_ids == (good,) and report.samples == 1
    [(sid, why)] = report.skipped
    assert sid == bad and "corrupt" in why
    assert len(_rows(out)) == 1
    assert main(["--home", str(tmp_path), "export", "--format", "openai",
                 str(tmp_path / "again.jsonl")]) == 0
    assert f"skipped {bad}: " in capsys.readouterr().out


def test_a_directory_as_out_is_a_usage_error_before_anything_is_written(tools_home,
                                                                        capsys) -> None:
    """Before, a traceback (IsADirectoryError) and a stray OUT.tmp beside the directory."""
    out = tools_home / "exports"
    out.mkdir()
    before = sorted(tools_home.iterdir())
    with pytest.raises(UsageError, match="is a directory; give the file to write"):
        export_sessions(tools_home / "sessions", out)
    assert main(["--home", str(tools_home), "export", str(out)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert sorted(tools_home.iterdir()) == before and not list(out.iterdir())


def test_a_failed_write_leaves_no_temporary_file(tools_home, monkeypatch) -> None:
    def refuse(self: Path, target: Path) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(UsageError, match="cannot write .*Permission denied"):
        export_sessions(tools_home / "sessions", tools_home / "out" / "x.jsonl")
    assert not list((tools_home / "out").iterdir())


@pytest.mark.parametrize(("content", "why"), [
    (b"", "no complete record"),
    (b"not json at all\n", "does not parse"),
    (bytes(range(256)), "corrupt"),
])
def test_an_empty_garbage_or_binary_log_is_skipped_and_named(tmp_path, capsys, content,
                                                              why) -> None:
    """Before, DuckDB read no event from them and they were left out without a word."""
    good = simple_session(tmp_path, "hello", "fine", ids=CountingIds(prefix="good"))
    (tmp_path / "sessions" / "bad.jsonl").write_bytes(content)
    report = export_sessions(tmp_path / "sessions", tmp_path / "out.jsonl")
    assert report.session_ids == (good,)
    [(sid, reason)] = report.skipped
    assert sid == "bad" and why in reason
    assert main(["--home", str(tmp_path), "export", str(tmp_path / "again.jsonl")]) == 0
    assert "skipped bad: " in capsys.readouterr().out
    named = export_sessions(tmp_path / "sessions", tmp_path / "x.jsonl",
                            filters=ExportFilters(session_ids=(good,)))
    assert named.skipped == ()


def test_a_session_that_is_not_there_is_a_usage_error(tools_home, capsys) -> None:
    """Before, 0 samples and exit 0 without a word."""
    with pytest.raises(UsageError, match="no session 'nosuch' under"):
        export_sessions(tools_home / "sessions", tools_home / "x.jsonl",
                        filters=ExportFilters(session_ids=("nosuch",)))
    out = tools_home / "cli.jsonl"
    assert main(["--home", str(tools_home), "export", str(out), "--session", "nosuch"]) == 2
    assert "no session 'nosuch'" in capsys.readouterr().err and not out.exists()


def test_a_segment_closed_before_its_reply_ends_with_the_last_answer(tmp_path) -> None:
    """Before, segment 0 ended with 'question 3', which only segment 1 answers."""
    compressed_session(tmp_path)
    segments = _export(tmp_path, "openai", lineage="segments")
    assert [s["messages"][-1]["role"] for s in segments] == ["assistant"] * len(segments)
    assert segments[0]["messages"][-1]["content"].startswith("answer 3")
    assert any(m["content"].startswith("question 3") for m in segments[1]["messages"])
