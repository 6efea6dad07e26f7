"""DuckDB over every session's event log: ``events`` (one row per envelope) and the views of
:mod:`pipeline.views` (``sessions``, ``turns``, ``model_calls``, ``tool_calls``, ...).

DuckDB only reads the JSONL logs; the writer never touches it. The logs are loaded into the
in-memory database first; then the connection is sealed (no file, extension or network access,
configuration locked), so that SQL from the command line can read the logs and nothing else:
not ``/etc/passwd``, not a ``COPY ... TO`` over a session's log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from effects.envelope import SUFFIX
from pipeline.views import create_views
from stages.errors import UsageError

__all__ = ["COLUMNS", "connect", "query"]

COLUMNS = ("{'session_id': 'VARCHAR', 'seq': 'BIGINT', 'kind': 'VARCHAR', "
            "'schema_version': 'INTEGER', 'recorded_at': 'VARCHAR', 'prev_hash': 'VARCHAR', "
            "'payload': 'JSON'}")

_EMPTY_EVENTS = ("SELECT NULL::VARCHAR AS session_id, NULL::BIGINT AS seq, NULL::VARCHAR AS kind, "
                 "NULL::INTEGER AS schema_version, NULL::VARCHAR AS recorded_at, "
                 "NULL::VARCHAR AS prev_hash, NULL::JSON AS payload WHERE false")
_SEAL = ("SET enable_external_access = false", "SET autoinstall_known_extensions = false",
         "SET autoload_known_extensions = false", "SET lock_configuration = true")
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
        for statement in _SEAL if sealed else ():
            con.execute(statement)
    except duckdb.Error as exc:
        con.close()
        raise UsageError(f"cannot load the event logs under {root}: {_first_line(exc)}") from exc
    return con


def _events_source(root: Path) -> str:
    files = sorted(str(p) for p in root.glob(f"*{SUFFIX}")) if root.is_dir() else []
    if not files:
        return _EMPTY_EVENTS
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    # A line that does not parse comes back as a row of NULLs: it is no event.
    return (f"SELECT * FROM read_json([{listed}], format='newline_delimited', "
            f"columns={COLUMNS}, ignore_errors=true) "
            "WHERE session_id IS NOT NULL AND seq IS NOT NULL AND kind IS NOT NULL")


def query(root: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` on a sealed connection: the column names and the rows of its last statement.

    Raises :class:`UsageError` with a one-line reason for an empty or failing query, and for one
    that tries to reach files, extensions or settings.
    """
    import duckdb
    if not sql.strip():
        raise UsageError("empty query: give a SQL statement, e.g. 'SELECT count(*) FROM events'")
    con = connect(root)
    try:
        cursor = con.execute(sql)
        if cursor is None:  # only comments or semicolons
            raise UsageError("no SQL statement in the query (only comments?)")
        return [d[0] for d in cursor.description or ()], cursor.fetchall()
    except duckdb.PermissionException as exc:
        raise UsageError(f"query refused: {_first_line(exc)} ({_READ_ONLY})") from exc
    except duckdb.Error as exc:
        reason = _first_line(exc)
        if "configuration has been locked" in reason:
            raise UsageError(f"query refused: {reason} ({_READ_ONLY})") from exc
        raise UsageError(f"query failed: {reason}") from exc
    finally:
        con.close()


def _first_line(exc: Exception) -> str:
    # DuckDB appends the statement and a caret on further lines; the first says what is wrong.
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
