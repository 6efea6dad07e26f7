"""DuckDB over every session's event log: ``events`` (one row per envelope) and the views of
:mod:`pipeline.insights.views` (``sessions``, ``turns``, ``model_calls``, ``tool_calls``, ...).

DuckDB only reads the JSONL logs; the writer never touches it. :func:`connect` loads the logs
into an in-memory database; :func:`query_index` (``mibyan sql``) brings the insights index
(:mod:`pipeline.insights.index`) up to date instead and opens it read-only. Either connection is
then
sealed (no file, extension or network access, configuration locked), so that SQL from the
command line can read the logs and nothing else: not ``/etc/passwd``, not a ``COPY ... TO``
over a session's log, not a change to the index.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from effects.eventlog.envelope import SUFFIX
from pipeline.insights.index import IndexReport, connect_index, index_path
from pipeline.insights.views import EVENT_COLUMNS, create_views
from stages.errors import UsageError

__all__ = ["DEFAULT_TIMEOUT", "connect", "query", "query_index"]

# Seconds a query may run before it is interrupted (``mibyan sql --timeout``).
DEFAULT_TIMEOUT = 60.0

_EMPTY_EVENTS = ("SELECT NULL::VARCHAR AS session_id, NULL::BIGINT AS seq, NULL::VARCHAR AS kind, "
                 "NULL::INTEGER AS schema_version, NULL::VARCHAR AS recorded_at, "
                 "NULL::VARCHAR AS prev_hash, NULL::JSON AS payload WHERE false")
# The progress bar would go to stdout, into the rows.
_SEAL = ("SET enable_progress_bar = false", "SET enable_external_access = false",
         "SET autoinstall_known_extensions = false", "SET autoload_known_extensions = false",
         "SET lock_configuration = true")
_READ_ONLY = "mibyan's SQL reads the event logs only (events and its views)"


def connect(root: Path, *, sealed: bool = True) -> Any:
    """An in-memory DuckDB connection with the ``events`` table and the views of every
    log under ``root``. ``sealed`` (the default) shuts every door to the outside afterwards;
    pass ``sealed=False`` only for SQL of your own (e.g. to scan a pandas frame)."""
    import duckdb
    con = duckdb.connect()
    try:
        con.execute(f"CREATE TABLE events AS {_events_source(root)}")
        create_views(con)
        if sealed:
            _seal(con)
    except duckdb.Error as exc:
        con.close()
        raise UsageError(f"cannot load the event logs under {root}: {_first_line(exc)}") from exc
    return con


def _seal(con: Any) -> None:
    for statement in _SEAL:
        con.execute(statement)


def _events_source(root: Path) -> str:
    files = sorted(str(p) for p in root.glob(f"*{SUFFIX}")) if root.is_dir() else []
    if not files:
        return _EMPTY_EVENTS
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    # A line that does not parse comes back as a row of NULLs: it is no event.
    return (f"SELECT * FROM read_json([{listed}], format='newline_delimited', "
            f"columns={EVENT_COLUMNS}, ignore_errors=true) "
            "WHERE session_id IS NOT NULL AND seq IS NOT NULL AND kind IS NOT NULL")


def query(root: Path, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT
          ) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` on a sealed in-memory connection: the column names and the rows of its last
    statement.

    Raises :class:`UsageError` with a one-line reason for an empty or failing query, for one
    that tries to reach files, extensions or settings, and for one still running after
    ``timeout`` seconds (None: no limit).
    """
    _check(sql)
    con = connect(root)
    try:
        return _run(con, sql, timeout)
    finally:
        con.close()


def query_index(root: Path, sql: str, *, index: Path | None = None, rebuild: bool = False,
                timeout: float | None = DEFAULT_TIMEOUT
                ) -> tuple[list[str], list[tuple], IndexReport]:
    """Run ``sql`` over the insights index of the logs under ``root`` (at ``index``, default
    ``<home>/insights.duckdb``), brought up to date first (rebuilt with ``rebuild``) as
    ``mibyan insights`` does: the column names, the rows of its last statement, and the
    update's report. The index is opened read-only and sealed, and refuses what :func:`query`
    refuses, and any change to itself; ``timeout`` limits the query (not the update)."""
    import duckdb
    _check(sql)
    path = Path(index) if index is not None else index_path(root)
    updated, report = connect_index(root, path=path, rebuild=rebuild)
    # Opened again read-only: no query may change what the next update takes for the logs.
    updated.close()
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise UsageError(f"cannot open the insights index {path}: {_first_line(exc)}") from exc
    try:
        _seal(con)
        columns, rows = _run(con, sql, timeout)
    finally:
        con.close()
    return columns, rows, report


def _check(sql: str) -> None:
    if not sql.strip():
        raise UsageError("empty query: give a SQL statement, e.g. 'SELECT count(*) FROM events'")


def _run(con: Any, sql: str, timeout: float | None) -> tuple[list[str], list[tuple]]:
    import duckdb
    # Not every DuckDB has a statement timeout setting: a timer interrupts the connection.
    timer = threading.Timer(timeout, con.interrupt) if timeout is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        cursor = con.execute(sql)
        if cursor is None:  # only comments or semicolons
            raise UsageError("no SQL statement in the query (only comments?)")
        return [d[0] for d in cursor.description or ()], cursor.fetchall()
    except duckdb.InterruptException as exc:
        raise UsageError(f"query stopped after {timeout:g} s, its time limit (give more with "
                         "--timeout SECONDS)") from exc
    except duckdb.PermissionException as exc:
        raise UsageError(f"query refused: {_first_line(exc)} ({_READ_ONLY})") from exc
    except duckdb.Error as exc:
        reason = _first_line(exc)
        if "configuration has been locked" in reason or "read-only mode" in reason:
            raise UsageError(f"query refused: {reason} ({_READ_ONLY})") from exc
        raise UsageError(f"query failed: {reason}") from exc
    finally:
        if timer is not None:
            timer.cancel()


def _first_line(exc: Exception) -> str:
    # DuckDB appends the statement and a caret on further lines; the first says what is wrong.
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
