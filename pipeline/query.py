"""DuckDB over every session's event log: ``events`` (one row per envelope) and ``sessions``.

DuckDB only reads the JSONL logs; the writer never touches it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from effects.envelope import SUFFIX

_COLUMNS = ("{'session_id': 'VARCHAR', 'seq': 'BIGINT', 'kind': 'VARCHAR', "
            "'schema_version': 'INTEGER', 'recorded_at': 'VARCHAR', 'prev_hash': 'VARCHAR', "
            "'payload': 'JSON'}")

_SESSIONS = """
CREATE VIEW sessions AS
WITH usage AS (
    SELECT session_id,
           sum(CAST(payload->'usage'->>'input_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'output_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'cache_read_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'cache_write_tokens' AS BIGINT)) AS tokens,
           count(*) AS api_calls
    FROM events WHERE kind = 'model_replied' GROUP BY session_id
)
SELECT e.session_id,
       min(e.payload->>'started_at') FILTER (WHERE e.kind = 'session_started') AS started_at,
       arg_max(e.payload->'settings'->>'model', e.seq)
           FILTER (WHERE e.kind IN ('session_started', 'session_resumed')) AS model,
       count(*) FILTER (WHERE e.kind = 'turn_started') AS turns,
       coalesce(any_value(u.api_calls), 0) AS api_calls,
       coalesce(any_value(u.tokens), 0) AS tokens,
       CASE WHEN count(*) FILTER (WHERE e.kind = 'turn_started')
                 > count(*) FILTER (WHERE e.kind = 'turn_finished') THEN 'open'
            ELSE coalesce(arg_max(e.payload->>'exit_reason', e.seq)
                              FILTER (WHERE e.kind = 'turn_finished'), 'new') END AS status,
       max(e.recorded_at) AS last_event_at
FROM events e LEFT JOIN usage u USING (session_id)
GROUP BY e.session_id
"""


def connect(root: Path) -> Any:
    """An in-memory DuckDB connection with the ``events`` and ``sessions`` views over ``root``."""
    import duckdb
    con = duckdb.connect()
    files = sorted(str(p) for p in root.glob(f"*{SUFFIX}")) if root.exists() else []
    if files:
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE VIEW events AS SELECT * FROM read_json([{listed}], "
                    f"format='newline_delimited', columns={_COLUMNS}, ignore_errors=true)")
    else:
        con.execute("CREATE VIEW events AS SELECT NULL::VARCHAR AS session_id, NULL::BIGINT AS "
                    "seq, NULL::VARCHAR AS kind, NULL::INTEGER AS schema_version, NULL::VARCHAR "
                    "AS recorded_at, NULL::VARCHAR AS prev_hash, NULL::JSON AS payload WHERE false")
    con.execute(_SESSIONS)
    return con


def query(root: Path, sql: str) -> tuple[list[str], list[tuple]]:
    con = connect(root)
    try:
        cursor = con.execute(sql)
        return [d[0] for d in cursor.description or ()], cursor.fetchall()
    finally:
        con.close()
