"""DuckDB over the logs reads the logs and nothing else (issue 8): in memory (``query``) and
through the insights index (``query_index``, ``mibyan sql``), which it cannot change either."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from effects.eventlog.store import SessionLog, session_path
from pipeline.insights.index import INDEX_NAME
from pipeline.insights.query import connect, query, query_index
from stages.errors import UsageError

T0 = "2026-01-01T00:00:00+00:00"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    with SessionLog.open(root, "s1", durability="flush") as log:
        log.append("session_started", 1, {"started_at": T0, "settings": {"model": "m"}}, T0)
        log.append("turn_started", 1, {}, T0)
        log.append("turn_finished", 1, {"exit_reason": "completed"}, T0)
    return root


Query = Callable[[Path, str], tuple[list[str], list[tuple]]]


def _through_the_index(root: Path, sql: str) -> tuple[list[str], list[tuple]]:
    columns, rows, _ = query_index(root, sql)
    return columns, rows


@pytest.fixture(params=["memory", "index"])
def ask(request) -> Query:
    return query if request.param == "memory" else _through_the_index


def test_queries_read_the_logs(root: Path, ask: Query) -> None:
    assert ask(root, "SELECT kind FROM events ORDER BY seq") == (
        ["kind"], [("session_started",), ("turn_started",), ("turn_finished",)])
    columns, rows = ask(root, "SELECT session_id, model, turns, status FROM sessions")
    assert (columns, rows) == (["session_id", "model", "turns", "status"],
                               [("s1", "m", 1, "completed")])
    assert ask(root, "SELECT 1; SELECT 2 AS two") == (["two"], [(2,)])  # the last statement
    none = root.parent / "none" / "sessions"
    assert ask(none, "SELECT count(*) AS n FROM events") == (["n"], [(0,)])


def test_a_garbage_file_among_the_logs_does_not_stop_a_query(root: Path, ask: Query) -> None:
    (root / "junk.jsonl").write_bytes(b"garbage\n")
    assert ask(root, "SELECT count(*) FROM events")[1] == [(3,)]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/passwd', sep = ':')",
    "SELECT * FROM read_json_objects('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "INSTALL httpfs",
    "LOAD httpfs",
])
def test_nothing_outside_the_logs_can_be_read(root: Path, ask: Query, sql: str) -> None:
    with pytest.raises(UsageError, match=r"^query refused: .*reads the event logs only"):
        ask(root, sql)


def test_a_session_log_cannot_be_overwritten(root: Path, ask: Query) -> None:
    path = session_path(root, "s1")
    before = path.read_bytes()
    for target in (path, root / "new.jsonl", root.parent / "out.csv"):
        for options in ("", " (FORMAT json)", " (FORMAT csv, USE_TMP_FILE false)"):
            with pytest.raises(UsageError, match=r"^query refused: "):
                ask(root, f"COPY (SELECT 'x' AS session_id) TO '{target}'{options}")
    with pytest.raises(UsageError, match=r"^query refused: "):
        ask(root, f"EXPORT DATABASE '{root}'")
    # Over the index open for the query DuckDB says no before it looks at the settings.
    with pytest.raises(UsageError, match=r"^query (refused|failed): "):
        ask(root, f"COPY (SELECT 'x' AS session_id) TO '{root.parent / INDEX_NAME}'")
    assert path.read_bytes() == before
    assert ask(root, "SELECT count(*) FROM events")[1] == [(3,)]
    # The log, the home's key that signed it and its note that it signed s1 (made by its
    # writer), nothing else.
    assert sorted(p.name for p in root.parent.rglob("*") if p.name != INDEX_NAME) == [
        "keys", "s1", "s1.jsonl", "sessions", "signed", "signing.key"]


def test_no_database_file_can_be_attached(root: Path, ask: Query) -> None:
    for target in (root / "x.db", session_path(root, "s1"), root.parent / INDEX_NAME):
        # The open index may come back as another name for itself, read-only as well.
        with pytest.raises(UsageError, match=r"^query refused: "):
            ask(root, f"ATTACH '{target}' AS other; CREATE TABLE other.mine AS SELECT 1")
    assert not (root / "x.db").exists()


@pytest.mark.parametrize("sql", [
    "DROP TABLE events", "DELETE FROM events", "UPDATE logs SET size = 0",
    "INSERT INTO events SELECT * FROM events", "CREATE TABLE mine AS SELECT 1",
    "DROP VIEW sessions", "CREATE OR REPLACE VIEW turns AS SELECT 1",
])
def test_the_index_cannot_be_changed_by_a_query(root: Path, sql: str) -> None:
    with pytest.raises(UsageError, match=r"^query refused: .*read-only mode"):
        query_index(root, sql)
    assert query_index(root, "SELECT count(*) FROM events")[1] == [(3,)]
    assert query_index(root, "SELECT turns FROM sessions")[1] == [(1,)]
    # A temporary table lives in memory with the query, not in the index.
    assert query_index(root, "CREATE TEMP TABLE t AS SELECT 7 AS x; SELECT x FROM t")[1] == [
        (7,)]


@pytest.mark.parametrize("sql", [
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SET lock_configuration = false",
    "SET allowed_directories = ['/']",
    "SET autoload_known_extensions = true",
    "PRAGMA enable_profiling",
    "SET enable_external_access = true; SELECT * FROM read_text('/etc/passwd')",
])
def test_the_configuration_cannot_be_changed_back(root: Path, ask: Query, sql: str) -> None:
    with pytest.raises(UsageError, match=r"^query refused: .*configuration has been locked"):
        ask(root, sql)


@pytest.mark.parametrize(("sql", "reason"), [
    ("", "empty query"), ("  \n\t", "empty query"), ("-- a comment", "no SQL statement"),
    ("SELEC 1", "query failed: Parser Error: syntax error"),
    ("SELECT * FROM nowhere", "query failed: Catalog Error: Table with name nowhere"),
])
def test_a_bad_query_is_a_one_line_usage_error(root: Path, ask: Query, sql: str,
                                               reason: str) -> None:
    with pytest.raises(UsageError) as caught:
        ask(root, sql)
    assert str(caught.value).startswith(reason) and "\n" not in str(caught.value)


def test_an_unsealed_connection_is_only_on_request(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("hello")
    sql = f"SELECT content FROM read_text('{outside}')"
    with connect(root, sealed=False) as con:
        assert con.execute(sql).fetchall() == [("hello",)]
    with connect(root) as con, pytest.raises(Exception, match="disabled by configuration"):
        con.execute(sql)


SLOW = "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b"


def test_a_query_past_its_time_limit_is_stopped_with_a_usage_error(root: Path) -> None:
    import time
    for ask in (lambda sql: query(root, sql, timeout=0.3),
                lambda sql: query_index(root, sql, timeout=0.3)):
        started = time.monotonic()
        with pytest.raises(UsageError, match=r"query stopped after 0\.3 s.*--timeout"):
            ask(SLOW)
        assert time.monotonic() - started < 20
    assert query(root, "SELECT count(*) FROM events", timeout=0.3)[1] == [(3,)]


def test_mibyan_sql_takes_a_timeout(tmp_path: Path) -> None:
    from tests.pipeline.test_cli import mibyan
    done = mibyan(tmp_path / "home", "sql", "--timeout", "0.5", SLOW)
    assert done.returncode == 2, done.stderr
    assert "query stopped after 0.5 s" in done.stderr and "Traceback" not in done.stderr
