"""Insights (issue 12): the unit views over recorded sessions, the incremental index against
the raw logs, ``summarise`` and ``mibyan insights``."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from effects.eventlog.envelope import encode_line, line_hash
from effects.eventlog.keys import keyring_of
from effects.performers import Effects
from pipeline.agent import Agent
from pipeline.cli.main import main
from pipeline.insights.figures import OUTCOMES, summarise
from pipeline.insights.index import open_index
from pipeline.insights.prices import PriceTable
from pipeline.insights.query import connect, query, query_index
from pipeline.insights.views import UNITS
from pipeline.settings import AgentSettings
from pipeline.testing import CountingIds, FakeClock, ScriptedModel
from stages.errors import UsageError
from stages.log.events import ModelReplied, SessionSettings, Usage
from stages.log.messages import Message
from tests.pipeline.test_replay_properties import SCRIPTS, run_live
from tests.sample_home import Sample, record
from tests.strategies.scripts import SessionScript


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Sample:
    return record(tmp_path_factory.mktemp("insights") / "home")


def copy_home(sessions: Path, to: Path) -> None:
    """A home's logs copied with the keys that signed them (without them it is a log moved to
    another home, which does not verify until its key is imported)."""
    shutil.copytree(sessions, to)
    shutil.copytree(sessions.parent / "keys", to.parent / "keys", dirs_exist_ok=True)


@pytest.fixture
def copy(sample: Sample, tmp_path: Path) -> Path:
    """A copy of the sample home's logs to change."""
    root = tmp_path / "home" / "sessions"
    copy_home(sample.root, root)
    return root


def _rows(con, unit: str) -> list[tuple]:
    return con.execute(f"SELECT * FROM {unit} ORDER BY ALL").fetchall()


def _all(con) -> dict[str, list[tuple]]:
    return {unit: _rows(con, unit) for unit in ("events", *UNITS)}


def _raw(root: Path) -> dict[str, list[tuple]]:
    with connect(root) as con:
        return _all(con)


def _indexed(root: Path, **kw) -> dict[str, list[tuple]]:
    with open_index(root, **kw) as (con, _):
        return _all(con)


# --- the views, by example ----------------------------------------------------------------------

def test_sessions_carry_their_lineage(sample: Sample) -> None:
    first, second, third = sample.alpha
    with connect(sample.root) as con:
        rows = con.execute("SELECT session_id, model, turns, parent_session_id, continued_in, "
                           "root_session_id, depth FROM sessions ORDER BY session_id").fetchall()
    assert rows == [(first, "gpt-4o-mini", 4, None, second, first, 0),
                    (second, "gpt-4o-mini", 2, first, third, first, 1),
                    (third, "gpt-4o-mini", 0, second, None, first, 2),
                    (sample.beta, "claude-sonnet-4-5", 2, None, None, sample.beta, 0)]


def test_turns_say_how_each_ended(sample: Sample) -> None:
    with connect(sample.root) as con:
        rows = con.execute("SELECT turn, exit_reason, completed, interrupted, budget_exhausted, "
                           "model_calls, tool_calls FROM turns WHERE session_id = ? "
                           "ORDER BY turn", [sample.beta]).fetchall()
        first = con.execute("SELECT model_calls, tool_calls, root_session_id FROM turns "
                            "WHERE session_id = ? AND turn = 1", [sample.alpha[0]]).fetchone()
    assert rows == [(1, "interrupted_by_user", False, True, False, 0, 0),
                    (2, "max_iterations_reached(1/1)", False, False, True, 2, 1)]
    assert first == (3, 2, sample.alpha[0])  # a failed call, a retry, the answer


def test_model_calls_pair_each_outcome_with_its_request(sample: Sample) -> None:
    with connect(sample.root) as con:
        rows = con.execute(
            "SELECT turn, purpose, provider, model, ok, status, input_tokens, output_tokens, "
            "cache_read_tokens, reasoning_tokens FROM model_calls WHERE session_id = ? "
            "AND turn = 1 ORDER BY seq", [sample.alpha[0]]).fetchall()
        summaries = con.execute("SELECT count(*), min(model), min(provider) FROM model_calls "
                                "WHERE purpose = 'summary'").fetchone()
    assert rows == [(1, "step", "openai", "gpt-4o-mini", False, 503, 0, 0, 0, 0),
                    (1, "step", "openai", "gpt-4o-mini", True, None, 100, 20, 200, 0),
                    (1, "step", "openai", "gpt-4o-mini", True, None, 100, 5, 300, 2)]
    assert summaries == (2, "gpt-4o-mini", None)


def test_tool_calls_recoveries_and_compressions(sample: Sample) -> None:
    first, second, third = sample.alpha
    with connect(sample.root) as con:
        tools = con.execute("SELECT session_id, turn, tool, ok, error FROM tool_calls "
                            "ORDER BY session_id, seq").fetchall()
        recoveries = con.execute("SELECT session_id, turn, reason, action, attempt "
                                 "FROM recoveries").fetchall()
        compressions = con.execute(
            "SELECT session_id, reason, saved_tokens = before_tokens - after_tokens, "
            "saved_tokens > 0, summarised, summary_model, continued_in, root_session_id "
            "FROM compressions ORDER BY session_id").fetchall()
    assert tools == [(first, 1, "add", True, None), (first, 1, "boom", False,
                                                     "ValueError: no luck with 1"),
                     (sample.beta, 2, "add", True, None)]
    assert recoveries == [(first, 1, "overloaded", "retry", 1)]
    assert compressions == [
        (first, "preflight", True, True, True, "gpt-4o-mini", second, first),
        (second, "preflight", True, True, True, "gpt-4o-mini", third, first)]


def test_the_index_has_the_same_views_as_the_logs(sample: Sample, tmp_path: Path) -> None:
    assert _indexed(sample.root, path=tmp_path / "i.duckdb") == _raw(sample.root)


# --- the incremental index ----------------------------------------------------------------------

def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_an_appended_log_is_read_from_where_the_index_left_it(copy: Path, sample: Sample
                                                               ) -> None:
    path = copy / f"{sample.beta}.jsonl"
    lines = _lines(path)
    path.write_bytes(b"".join(lines[:5]))
    with open_index(copy) as (_, report):
        assert report.records_added == sum(len(_lines(p)) for p in copy.glob("*.jsonl"))
    path.write_bytes(b"".join(lines[:9]) + lines[9][:20])  # a torn line: not yet indexed
    with open_index(copy) as (_, report):
        assert (report.appended, report.records_added, report.unchanged) == (
            (sample.beta,), 4, 3)
    path.write_bytes(b"".join(lines))
    with open_index(copy) as (con, report):
        assert (report.appended, report.records_added) == ((sample.beta,), len(lines) - 9)
        assert _all(con) == _raw(copy) == _indexed(copy, rebuild=True,
                                                   path=copy.parent / "other.duckdb")


def test_a_truncated_or_changed_log_is_read_again(copy: Path, sample: Sample) -> None:
    path = copy / f"{sample.alpha[0]}.jsonl"
    lines = _lines(path)
    assert _indexed(copy) == _raw(copy)
    path.write_bytes(b"".join(lines[:10]))
    with open_index(copy) as (con, report):
        assert report.reindexed == (sample.alpha[0],) and report.records_added == 10
        assert _all(con) == _raw(copy)
    # Same size, another last record: the stored hash no longer matches.
    changed = lines[9].replace(b'"seq":9', b'"seq":8')
    path.write_bytes(b"".join(lines[:9]) + changed + b"".join(lines[10:12]))
    with open_index(copy) as (con, report):
        assert report.reindexed == (sample.alpha[0],)
        assert report.problems == ((sample.alpha[0], "seq 9: fails its own hash (the line "
                                    "was changed after it was written)"),)
        assert con.execute("SELECT count(*) FROM events WHERE session_id = ?",
                           [sample.alpha[0]]).fetchone() == (9,)
    path.write_bytes(b"".join(lines))
    assert _indexed(copy) == _raw(copy)


def test_a_log_corrupted_in_place_is_read_again_up_to_the_damage(copy: Path,
                                                                  sample: Sample) -> None:
    path = copy / f"{sample.alpha[0]}.jsonl"
    assert _indexed(copy) == _raw(copy)
    data = bytearray(path.read_bytes())
    at = sum(len(line) for line in _lines(path)[:5]) + 30  # inside record 5
    data[at] = ord("x") if data[at] != ord("x") else ord("y")
    path.write_bytes(bytes(data))
    with open_index(copy) as (con, report):
        assert report.reindexed == (sample.alpha[0],)
        assert [(sid, p[:7]) for sid, p in report.problems] == [(sample.alpha[0], "seq 5: ")]
        assert _all(con) == _indexed(copy, rebuild=True, path=copy.parent / "fresh.duckdb")
        assert con.execute("SELECT max(seq) FROM events WHERE session_id = ?",
                           [sample.alpha[0]]).fetchone() == (4,)
    with open_index(copy) as (_, report):  # still reported, nothing read again
        assert report.unchanged == 4 and len(report.problems) == 1


def test_a_changed_closing_brace_is_a_problem_not_a_crash(copy: Path, sample: Sample) -> None:
    """The seal is followed by the line's last two bytes; one changed there is a bad line (it
    used to pass the fast check and then break the index's JSON read with a traceback)."""
    path = copy / f"{sample.alpha[0]}.jsonl"
    data = bytearray(path.read_bytes())
    data[-2] = ord("]")  # the last line's closing brace
    path.write_bytes(bytes(data))
    with open_index(copy) as (con, report):
        [(sid, problem)] = report.problems
        assert sid == sample.alpha[0] and "does not parse" in problem
        records = len(_lines(path))
        assert con.execute("SELECT max(seq) FROM events WHERE session_id = ?",
                           [sid]).fetchone() == (records - 2,)


def _rewritten(path: Path, edit) -> None:
    """``path`` with each record's envelope passed through ``edit`` and chained anew, put back
    with its size and modification time as they were (as a restore or ``cp -p`` leaves it)."""
    stat = path.stat()
    out, prev = [], None
    for line in _lines(path):
        obj = json.loads(line)
        obj = edit({**obj, "prev_hash": prev or obj["prev_hash"]})
        # Signed anew with the home's key: a restore of what this home wrote.
        raw = encode_line(obj["session_id"], obj["seq"], obj["kind"], obj["schema_version"],
                          obj["recorded_at"], obj["prev_hash"], obj["payload"],
                          keyring_of(path.parent, create=True).signing)
        out.append(raw + b"\n")
        prev = line_hash(raw)
    path.write_bytes(b"".join(out))
    assert path.stat().st_size == stat.st_size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_log_rewritten_to_its_size_and_time_is_read_again(copy: Path, sample: Sample) -> None:
    """A consistent rewrite (an earlier record changed, the chain made anew after it) keeps
    size and time but not the last record's hash: the index follows the new content."""
    path, sid = copy / f"{sample.alpha[0]}.jsonl", sample.alpha[0]
    assert _indexed(copy) == _raw(copy)

    def later(obj: dict) -> dict:
        if obj["seq"] == 3:
            obj["recorded_at"] = obj["recorded_at"].replace("T09:", "T08:")
        return obj

    _rewritten(path, later)
    with open_index(copy) as (con, report):
        assert (report.reindexed, report.unchanged, report.problems) == ((sid,), 3, ())
        assert con.execute("SELECT recorded_at FROM events WHERE session_id = ? AND seq = 3",
                           [sid]).fetchone()[0].startswith("2026-01-01T08:")
        assert _all(con) == _raw(copy)


def test_a_log_broken_at_its_size_and_time_reports_the_damage(copy: Path,
                                                              sample: Sample) -> None:
    """The last record no longer chains to the one before (a link changed, the line sealed
    anew), size and time kept: the log is read again and its problem reported."""
    path, sid = copy / f"{sample.alpha[0]}.jsonl", sample.alpha[0]
    records = len(_lines(path))
    assert _indexed(copy) == _raw(copy)

    def unlinked(obj: dict) -> dict:
        if obj["seq"] == records - 1:
            obj["prev_hash"] = "0" * 64
        return obj

    _rewritten(path, unlinked)
    with open_index(copy) as (con, report):
        [(problem_sid, problem)] = report.problems
        assert report.reindexed == (sid,) and problem_sid == sid
        assert problem.startswith(f"seq {records - 1}: ")
        assert con.execute("SELECT max(seq) FROM events WHERE session_id = ?",
                           [sid]).fetchone() == (records - 2,)


def test_a_log_cut_while_it_is_copied_is_left_for_the_next_update(
        copy: Path, sample: Sample, monkeypatch) -> None:
    """Bytes copied before the log shrank under the reader are not indexed (they used to
    reach the index, a line cut in half breaking its JSON read)."""
    import pipeline.insights.index as index_module
    real = index_module.scan
    path = copy / f"{sample.alpha[0]}.jsonl"

    def scan_then_cut(fh, session_id, start, keyring):
        found = real(fh, session_id, start, keyring)
        if session_id == sample.alpha[0]:
            with open(path, "r+b") as log:
                log.truncate(found.position.offset // 2)
        return found

    monkeypatch.setattr(index_module, "scan", scan_then_cut)
    with open_index(copy) as (con, report):
        assert sample.alpha[0] not in report.indexed
        assert con.execute("SELECT count(*) FROM events WHERE session_id = ?",
                           [sample.alpha[0]]).fetchone() == (0,)
    monkeypatch.setattr(index_module, "scan", real)
    assert _indexed(copy) == _raw(copy)


def test_a_removed_log_leaves_the_index(copy: Path, sample: Sample) -> None:
    assert _indexed(copy) == _raw(copy)
    (copy / f"{sample.beta}.jsonl").unlink()
    with open_index(copy) as (con, report):
        assert report.dropped == (sample.beta,)
        assert _all(con) == _raw(copy)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.booleans()),
                min_size=1, max_size=4))
def test_index_then_query_equals_a_query_over_the_raw_logs(sample: Sample, tmp_path: Path,
                                                           steps) -> None:
    """Logs cut back and grown again in any order (a torn line among them): the index,
    updated after each step, reads as the logs do."""
    home = Path(tempfile.mkdtemp(dir=tmp_path))
    root = home / "sessions"
    copy_home(sample.root, root)
    full = {p: _lines(p) for p in sorted(root.glob("*.jsonl"))}
    paths = list(full)
    for which, keep, torn in steps:
        path = paths[which % len(paths)]
        keep = max(1, min(keep, len(full[path])))
        tail = full[path][keep][:15] if torn and keep < len(full[path]) else b""
        path.write_bytes(b"".join(full[path][:keep]) + tail)
        assert _indexed(root) == _raw(root)
    shutil.rmtree(home)


# --- mibyan sql, through the index -------------------------------------------------------------

def test_sql_through_the_index_gives_the_rows_of_a_query_over_the_raw_logs(
        sample: Sample, tmp_path: Path, capsys) -> None:
    from pipeline.cli.commands import _table
    home = tmp_path / "home"
    copy_home(sample.root, home / "sessions")
    root = home / "sessions"
    for unit in ("events", *UNITS):
        sql = f"SELECT * FROM {unit} ORDER BY ALL"
        assert query_index(root, sql)[:2] == query(root, sql)
    sql = ("SELECT s.session_id, s.model, count(t.turn) AS turns, sum(t.tokens) AS tokens "
           "FROM sessions s JOIN turns t USING (session_id) GROUP BY ALL ORDER BY ALL")
    assert main(["--home", str(home), "sql", sql]) == 0
    shown = capsys.readouterr()
    _table(*query(root, sql))
    assert shown.out == capsys.readouterr().out and shown.err == ""
    assert "(3 rows)" in shown.out
    # It was insights' own index that sql brought up to date: nothing left for insights to read.
    assert _cli_json(capsys, "--home", str(home), "insights", "--json")["index"][
        "records_added"] == 0


def test_sql_sees_a_log_appended_after_the_last_query(copy: Path, sample: Sample,
                                                      capsys) -> None:
    home, path = copy.parent, copy / f"{sample.beta}.jsonl"
    lines = _lines(path)
    path.write_bytes(b"".join(lines[:5]))

    def count() -> str:
        assert main(["--home", str(home), "sql", "SELECT count(*) AS n FROM events WHERE "
                     f"session_id = '{sample.beta}'"]) == 0
        return capsys.readouterr().out.splitlines()[1].strip()

    assert count() == "5"
    path.write_bytes(b"".join(lines))
    assert count() == str(len(lines))
    with open_index(copy) as (_, report):
        assert report.records_added == 0 and report.unchanged == 4


def test_sql_reindex_rebuilds_as_insights_does(copy: Path, sample: Sample, capsys) -> None:
    """A change in place that keeps a log's size and time and breaks its chain below the last
    indexed record is only seen with --reindex (the last record still hashes as indexed)."""
    home, path = copy.parent, copy / f"{sample.alpha[0]}.jsonl"
    sql = f"SELECT max(seq) AS last FROM events WHERE session_id = '{sample.alpha[0]}'"
    assert main(["--home", str(home), "sql", sql]) == 0
    before = capsys.readouterr().out.splitlines()[1].strip()
    stat = path.stat()
    data = bytearray(path.read_bytes())
    at = sum(len(line) for line in _lines(path)[:5]) + 30  # inside record 5
    data[at] = ord("x") if data[at] != ord("x") else ord("y")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert main(["--home", str(home), "sql", sql]) == 0
    assert capsys.readouterr().out.splitlines()[1].strip() == before
    assert main(["--home", str(home), "sql", "--reindex", sql]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].strip() == "4"
    assert err.startswith(f"mibyan: log problem (indexed up to it): {sample.alpha[0]}: seq 5: ")


# --- summarise, prices and the command ----------------------------------------------------------

def test_summarise_counts_everything(sample: Sample, tmp_path: Path) -> None:
    found = summarise(sample.root, index=tmp_path / "i.duckdb")
    assert found.sessions == 3 and found.turns["turns"] == 8
    assert found.tokens == {"input_tokens": 5142, "output_tokens": 838,
                            "cache_read_tokens": 500, "cache_write_tokens": 0,
                            "reasoning_tokens": 2, "total_tokens": 6480}
    assert found.tool_calls == {"calls": 3, "errors": 1, "rejected": 0, "flagged": 0,
                                "error_rate": 0.3333}
    assert {k: found.recoveries[k] for k in ("retries", "interrupts", "budget_exhaustions")} == {
        "retries": 1, "interrupts": 1, "budget_exhaustions": 1}
    assert found.compressions["count"] == 2 and found.compressions["saved_tokens"] > 0
    assert [d["day"] for d in found.by_day] == ["2026-01-01", "2026-01-02"]
    assert [h["hour"] for h in found.by_hour] == [9, 14]
    mini = PriceTable().find("gpt-4o-mini")
    assert mini is not None and found.models[0]["cost_usd"] == round(mini.cost(
        input_tokens=4559, output_tokens=830, cache_read_tokens=500), 6)


def test_summarise_by_days_and_model(sample: Sample, tmp_path: Path) -> None:
    index = tmp_path / "i.duckdb"
    late = summarise(sample.root, days=1, now=dt.datetime(2026, 1, 3, tzinfo=dt.UTC),
                     index=index)
    claude = summarise(sample.root, model="claude-sonnet-4-5", index=index)
    for found in (late, claude):
        assert found.sessions == 1 and found.turns["turns"] == 2
        assert [m["model"] for m in found.models] == ["claude-sonnet-4-5"]
        assert found.tool_calls["calls"] == 1 and found.compressions["count"] == 0
    with pytest.raises(UsageError, match="days must be at least 1"):
        summarise(sample.root, days=0, index=index)


def test_a_model_name_is_data_not_sql(sample: Sample, tmp_path: Path) -> None:
    found = summarise(sample.root, model="x' OR true OR model = '", index=tmp_path / "i.duckdb")
    assert found.sessions == 0 and found.models == () and found.turns["turns"] == 0


def _cli_json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_the_command_prints_json_and_takes_prices(sample: Sample, tmp_path: Path,
                                                  capsys) -> None:
    home = tmp_path / "home"
    copy_home(sample.root, home / "sessions")
    out = _cli_json(capsys, "--home", str(home), "insights", "--json")
    assert out["sessions"] == 3 and out["tokens"]["total_tokens"] == 6480
    assert out["index"]["logs"] == 4 and (home / "insights.duckdb").exists()
    (home / "config.toml").write_text('[prices."claude-sonnet-4-5"]\ninput = 1000\n'
                                      'output = 0\n')
    out = _cli_json(capsys, "--home", str(home), "insights", "--json", "--model",
                    "claude-sonnet-4-5")
    assert out["cost_usd"] == pytest.approx(583 * 1000 / 1e6)
    out = _cli_json(capsys, "--home", str(home), "insights", "--json", "--price",
                    "claude-sonnet-4-5=0,1000", "--reindex")
    assert [m["cost_usd"] for m in out["models"]] == [0.001219, 0.008]


def test_the_command_prints_tables(sample: Sample, tmp_path: Path, capsys) -> None:
    home = tmp_path / "home"
    copy_home(sample.root, home / "sessions")
    assert main(["--home", str(home), "insights", "--days", "3650"]) == 0
    text = capsys.readouterr().out
    for title in ("Overview", "Tokens", "Models", "Tools", "Latency", "By day", "By hour"):
        assert title in text
    assert "boom" in text and "gpt-4o-mini" in text
    assert main(["--home", str(home), "insights", "--price", "nonsense"]) == 2


def test_a_scripted_session_in_every_view(tmp_path: Path) -> None:
    from pipeline.agent import Agent
    from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
    from tests.sample_home import add

    model = ScriptedModel(tool_calls(("add", {"a": 1, "b": 2})), "It is 3.")
    with Agent(client=model, tools=[add], clock=FakeClock(tick=1.0), ids=CountingIds(),
               home=tmp_path, model="scripted", durability="flush") as agent:
        assert agent.chat("1 + 2?") == "It is 3."
    model.assert_complete()
    root = tmp_path / "sessions"
    with open_index(root) as (con, _):
        assert con.execute("SELECT model, turns, api_calls, status, root_session_id "
                           "FROM sessions").fetchall() == [
            ("scripted", 1, 2, "text_response(finish_reason=stop)", "session_0001")]
        assert con.execute("SELECT turn, completed, model_calls, tool_calls, tokens "
                           "FROM turns").fetchall() == [(1, True, 2, 1, 24)]
        assert con.execute("SELECT model, finish_reason, input_tokens, output_tokens "
                           "FROM model_calls ORDER BY seq").fetchall() == [
            ("scripted", "tool_calls", 10, 2), ("scripted", "stop", 10, 2)]
        assert con.execute("SELECT tool, ok, turn FROM tool_calls").fetchall() == [
            ("add", True, 1)]
        for empty in ("recoveries", "compressions"):
            assert con.execute(f"SELECT count(*) FROM {empty}").fetchone() == (0,)
        turn = con.execute("SELECT started_at, finished_at FROM turns").fetchone()
        assert turn[0].year == 2026 and turn[1] > turn[0]  # the fake clock's times


# --- outcomes add up; unreadable logs are named -------------------------------------------------

def _bucketed(turns: dict[str, int]) -> int:
    return sum(turns[outcome] for outcome in OUTCOMES)


def test_a_turn_cut_short_lands_in_a_bucket(tmp_path: Path) -> None:
    """Before, a turn ending incomplete_response was counted in no bucket."""
    cut = ModelReplied(message=Message(role="assistant", content="part"), model="scripted",
                       finish_reason="length", latency_ms=1.0, usage=Usage(output_tokens=1))
    model = ScriptedModel(*[cut] * 4)
    with Agent(settings=SessionSettings(model="m", provider="custom"),
               agent_settings=AgentSettings(home=tmp_path),
               effects=Effects(clock=FakeClock(), ids=CountingIds(), model=model)) as agent:
        assert agent.run("write a lot").turn_exit_reason == "incomplete_response"
    found = summarise(tmp_path / "sessions", index=tmp_path / "i.duckdb")
    assert found.turns["incomplete"] == 1 and _bucketed(found.turns) == found.turns["turns"] == 1


def test_the_sample_s_buckets_add_up(sample: Sample, tmp_path: Path) -> None:
    found = summarise(sample.root, index=tmp_path / "i.duckdb")
    assert _bucketed(found.turns) == found.turns["turns"] == 8


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(script=SCRIPTS)
def test_every_turn_lands_in_exactly_one_bucket(script: SessionScript) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        live = run_live(Path(tmp), script, None)
        found = summarise(live.root, index=Path(tmp) / "i.duckdb")
    assert _bucketed(found.turns) == found.turns["turns"] == len(script.turns)


@pytest.mark.parametrize("content", [b"", b"not json at all\n", b'{"torn": '])
def test_a_log_with_no_record_is_named_by_insights_and_sql(copy: Path, capsys,
                                                           content: bytes) -> None:
    """Before, `sql` named the unparseable logs but not an empty one, and `insights` named
    none where its tables were not shown (`--json`)."""
    (copy / "bad.jsonl").write_bytes(content)
    home = copy.parent
    assert main(["--home", str(home), "insights", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "mibyan: log problem (indexed up to it): bad: seq 0: " in err or \
        "mibyan: log problem (indexed up to it): bad: the log has no complete record" in err
    assert any(p.startswith("bad: ") for p in json.loads(out)["index"]["problems"])
    for command in (["insights"], ["sql", "SELECT 1"], ["sql", "--reindex", "SELECT 1"]):
        assert main(["--home", str(home), *command]) == 0
        assert "mibyan: log problem (indexed up to it): bad: " in capsys.readouterr().err


# --- failures explained (issue 25: "gave up: 0" beside 7 failed turns) --------------------------

def test_failed_turns_are_named_by_exit_reason_and_their_calls_by_reason_and_provider(
        tmp_path: Path, capsys) -> None:
    from pipeline.agent import Agent
    from tests.fake_openai import FakeOpenAIServer, Reply

    home = tmp_path / "home"
    with FakeOpenAIServer() as server:
        server.script(Reply.text("hello"),
                      *[Reply.error(401, "bad key", code="invalid_api_key")] * 2)
        with Agent(model="unpriced-model", base_url=server.base_url, api_key="sk-x",
                   home=home, max_retries=0, stream=False) as agent:
            assert agent.run("hi").completed
            for _ in range(2):
                assert agent.run("hi").failed
    found = summarise(home / "sessions", index=tmp_path / "i.duckdb")
    assert found.turns["failed"] == 2
    [turns] = found.failures["turns"]
    assert turns["turns"] == 2 and turns["exit_reason"].startswith("model_error")
    [calls] = found.failures["model_calls"]
    assert (calls["reason"], calls["provider"], calls["calls"]) == ("auth", "openai", 2)
    assert found.unpriced_models == ("unpriced-model",)
    assert main(["--home", str(home), "insights"]) == 0
    text = capsys.readouterr().out
    assert "Unfinished turns" in text and "model_error" in text
    assert "Failed model calls" in text and "auth" in text
    assert "unpriced: unpriced-model" in text and "0.0000" not in text
