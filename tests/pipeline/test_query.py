"""DuckDB over the logs reads the logs and nothing else (issue 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from effects.eventlog import SessionLog, session_path
from pipeline.query import connect, query
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


def test_queries_read_the_logs(root: Path) -> None:
    assert query(root, "SELECT kind FROM events ORDER BY seq") == (
        ["kind"], [("session_started",), ("turn_started",), ("turn_finished",)])
    columns, rows = query(root, "SELECT session_id, model, turns, status FROM sessions")
    assert (columns, rows) == (["session_id", "model", "turns", "status"],
                               [("s1", "m", 1, "completed")])
    assert query(root, "SELECT 1; SELECT 2 AS two") == (["two"], [(2,)])  # the last statement
    assert query(root.parent / "none", "SELECT count(*) AS n FROM events") == (["n"], [(0,)])


def test_a_garbage_file_among_the_logs_does_not_stop_a_query(root: Path) -> None:
    (root / "junk.jsonl").write_bytes(b"garbage\n")
    assert query(root, "SELECT count(*) FROM events")[1] == [(3,)]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/passwd', sep = ':')",
    "SELECT * FROM read_json_objects('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "INSTALL httpfs",
    "LOAD httpfs",
])
def test_nothing_outside_the_logs_can_be_read(root: Path, sql: str) -> None:
    with pytest.raises(UsageError, match=r"^query refused: .*reads the event logs only"):
        query(root, sql)


def test_a_session_log_cannot_be_overwritten(root: Path) -> None:
    path = session_path(root, "s1")
    before = path.read_bytes()
    for target in (path, root / "new.jsonl", root.parent / "out.csv"):
        for options in ("", " (FORMAT json)", " (FORMAT csv, USE_TMP_FILE false)"):
            with pytest.raises(UsageError, match=r"^query refused: "):
                query(root, f"COPY (SELECT 'x' AS session_id) TO '{target}'{options}")
    with pytest.raises(UsageError, match=r"^query refused: "):
        query(root, f"EXPORT DATABASE '{root}'")
    assert path.read_bytes() == before
    assert sorted(p.name for p in root.parent.rglob("*")) == ["s1.jsonl", "sessions"]


def test_no_database_file_can_be_attached(root: Path) -> None:
    for target in (root / "x.db", session_path(root, "s1")):
        with pytest.raises(UsageError, match=r"^query refused: "):
            query(root, f"ATTACH '{target}' AS other")
    assert not (root / "x.db").exists()


@pytest.mark.parametrize("sql", [
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SET lock_configuration = false",
    "SET allowed_directories = ['/']",
    "SET autoload_known_extensions = true",
    "PRAGMA enable_profiling",
    "SET enable_external_access = true; SELECT * FROM read_text('/etc/passwd')",
])
def test_the_configuration_cannot_be_changed_back(root: Path, sql: str) -> None:
    with pytest.raises(UsageError, match=r"^query refused: .*configuration has been locked"):
        query(root, sql)


@pytest.mark.parametrize(("sql", "reason"), [
    ("", "empty query"), ("  \n\t", "empty query"), ("-- a comment", "no SQL statement"),
    ("SELEC 1", "query failed: Parser Error: syntax error"),
    ("SELECT * FROM nowhere", "query failed: Catalog Error: Table with name nowhere"),
])
def test_a_bad_query_is_a_one_line_usage_error(root: Path, sql: str, reason: str) -> None:
    with pytest.raises(UsageError) as caught:
        query(root, sql)
    assert str(caught.value).startswith(reason) and "\n" not in str(caught.value)


def test_an_unsealed_connection_is_only_on_request(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("hello")
    sql = f"SELECT content FROM read_text('{outside}')"
    with connect(root, sealed=False) as con:
        assert con.execute(sql).fetchall() == [("hello",)]
    with connect(root) as con, pytest.raises(Exception, match="disabled by configuration"):
        con.execute(sql)
