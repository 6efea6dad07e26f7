"""The SQL views over ``events`` (one row per envelope): one view per natural unit of a session.

``sessions``, ``turns``, ``model_calls``, ``tool_calls``, ``recoveries``, ``compressions``, and
``lineage`` (a compressed session goes on in a child session: every unit names the session its
chain started in, ``root_session_id``). The same views sit on the in-memory connection of
:func:`pipeline.insights.query.connect` and on the insights index (:mod:`pipeline.insights.index`,
which
``mibyan insights`` and ``mibyan sql`` read); each is plain SQL over ``events``, so whatever
holds that table gets them. Times are the journal clock's
``recorded_at`` (and ``started_at`` of a turn), as UTC ``TIMESTAMP`` values.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EVENT_COLUMNS", "SESSIONS_WITH_LINEAGE", "TOKEN_BUCKETS", "UNITS",
           "create_unit_tables", "create_views", "refresh_lineage", "refresh_units",
           "unit_select"]

# ``events`` as read_json reads it from the logs: the in-memory connection of
# :mod:`pipeline.insights.query` loads them so, and the index appends them so.
EVENT_COLUMNS = ("{'session_id': 'VARCHAR', 'seq': 'BIGINT', 'kind': 'VARCHAR', "
                 "'schema_version': 'INTEGER', 'recorded_at': 'VARCHAR', 'prev_hash': 'VARCHAR', "
                 "'payload': 'JSON'}")

_AT = "timezone('UTC', CAST({} AS TIMESTAMPTZ))"
TOKEN_BUCKETS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
           "reasoning_tokens")


def _usage(source: str) -> str:
    return ",\n       ".join(f"coalesce(CAST({source}->'usage'->>'{t}' AS BIGINT), 0) AS {t}"
                            for t in TOKEN_BUCKETS)


# Each unit's rows come from the events of their own session only, so the index keeps them as
# tables refreshed per session (``refresh_units``); the lineage joins them at query time.
_LINKS = """
SELECT session_id,
       any_value(payload->>'parent_session_id')
           FILTER (WHERE kind = 'session_started') AS parent_session_id,
       arg_max(payload->>'child_session_id', seq)
           FILTER (WHERE kind = 'session_split') AS child_session_id
FROM src WHERE kind IN ('session_started', 'session_split') GROUP BY session_id
"""

_LINEAGE = """
CREATE OR REPLACE {name} AS
WITH RECURSIVE links AS (SELECT * FROM {links}),
chain(session_id, root_session_id, depth, path) AS (
    SELECT session_id, session_id, 0, [session_id] FROM links
    WHERE parent_session_id IS NULL
       OR parent_session_id NOT IN (SELECT session_id FROM links)
    UNION ALL
    SELECT l.session_id, c.root_session_id, c.depth + 1, list_append(c.path, l.session_id)
    FROM links l JOIN chain c ON l.parent_session_id = c.session_id
    WHERE NOT list_contains(c.path, l.session_id)
)
SELECT l.session_id, l.parent_session_id, l.child_session_id,
       coalesce(c.root_session_id, l.session_id) AS root_session_id,
       coalesce(c.depth, 0) AS depth
FROM links l LEFT JOIN chain c USING (session_id)
"""

_SESSIONS = """
WITH usage AS (
    SELECT session_id,
           sum(CAST(payload->'usage'->>'input_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'output_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'cache_read_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'cache_write_tokens' AS BIGINT)) AS tokens,
           count(*) AS api_calls
    FROM src WHERE kind = 'model_replied' GROUP BY session_id
)
SELECT e.session_id,
       min(e.payload->>'started_at') FILTER (WHERE e.kind = 'session_started') AS started_at,
       arg_max(e.payload->'settings'->>'model', e.seq)
           FILTER (WHERE e.kind IN ('session_started', 'session_resumed', 'session_forked'))
           AS model,
       count(*) FILTER (WHERE e.kind = 'turn_started') AS turns,
       coalesce(any_value(u.api_calls), 0) AS api_calls,
       coalesce(any_value(u.tokens), 0) AS tokens,
       CASE WHEN count(*) FILTER (WHERE e.kind = 'turn_started')
                 > count(*) FILTER (WHERE e.kind = 'turn_finished') THEN 'open'
            ELSE coalesce(arg_max(e.payload->>'exit_reason', e.seq)
                              FILTER (WHERE e.kind = 'turn_finished'), 'new') END AS status,
       max(e.recorded_at) AS last_event_at,
       count(*) AS events
FROM src e LEFT JOIN usage u USING (session_id)
GROUP BY e.session_id
"""

# Where each turn starts: the events of a session after it (to the next start) belong to it.
_STARTS = """
SELECT session_id, seq, payload->>'turn_id' AS turn_id,
       row_number() OVER (PARTITION BY session_id ORDER BY seq) AS turn
FROM src WHERE kind = 'turn_started'
"""

_TURNS = f"""
WITH starts AS (
    SELECT e.session_id, e.seq, s.turn, s.turn_id, e.payload->>'task_id' AS task_id,
           {_AT.format("e.payload->>'started_at'")} AS started_at
    FROM src e JOIN starts s USING (session_id, seq)
), marks AS (
    SELECT e.session_id, e.seq, e.kind, e.payload, {_AT.format('e.recorded_at')} AS ts, s.turn
    FROM src e ASOF JOIN starts s ON e.session_id = s.session_id AND e.seq >= s.seq
    WHERE e.kind IN ('turn_finished', 'model_requested', 'tool_ran', 'tool_call_rejected',
                     'model_replied', 'interrupted', 'budget_exhausted', 'turn_aborted')
), per_turn AS (
    SELECT session_id, turn,
           arg_max(payload, seq) FILTER (WHERE kind = 'turn_finished') AS finish,
           max(ts) FILTER (WHERE kind = 'turn_finished') AS finished_at,
           count(*) FILTER (WHERE kind = 'model_requested') AS model_calls,
           count(*) FILTER (WHERE kind IN ('tool_ran', 'tool_call_rejected')) AS tool_calls,
           sum(CAST(payload->'usage'->>'input_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'output_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'cache_read_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'cache_write_tokens' AS BIGINT))
               FILTER (WHERE kind = 'model_replied') AS tokens,
           count(*) FILTER (WHERE kind = 'interrupted') > 0 AS interrupted_by_user,
           count(*) FILTER (WHERE kind = 'budget_exhausted') > 0 AS budget_exhausted,
           count(*) FILTER (WHERE kind = 'turn_aborted') > 0 AS aborted
    FROM marks GROUP BY session_id, turn
)
SELECT s.session_id, s.turn, s.turn_id, s.task_id, s.seq, s.started_at, p.finished_at,
       date_diff('millisecond', s.started_at, p.finished_at) / 1000.0 AS duration_s,
       CASE WHEN p.finish IS NULL THEN 'open' ELSE p.finish->>'exit_reason' END AS exit_reason,
       CAST(p.finish->>'completed' AS BOOLEAN) AS completed,
       CAST(p.finish->>'failed' AS BOOLEAN) AS failed,
       coalesce(CAST(p.finish->>'interrupted' AS BOOLEAN), p.interrupted_by_user, false)
           AS interrupted,
       coalesce(p.budget_exhausted, false) AS budget_exhausted,
       coalesce(p.aborted, false) AS aborted,
       coalesce(p.model_calls, 0) AS model_calls, coalesce(p.tool_calls, 0) AS tool_calls,
       coalesce(p.tokens, 0) AS tokens
FROM starts s LEFT JOIN per_turn p USING (session_id, turn)
"""

_MODEL_CALLS = f"""
WITH requests AS (
    SELECT session_id, seq, payload FROM src WHERE kind = 'model_requested'
), outcomes AS (
    SELECT session_id, seq, kind, recorded_at, payload FROM src
    WHERE kind IN ('model_replied', 'model_failed', 'context_summarised', 'summary_failed')
), paired AS (
    SELECT o.*, CASE WHEN o.kind IN ('model_replied', 'model_failed') THEN r.payload END AS req
    FROM outcomes o ASOF LEFT JOIN requests r
        ON o.session_id = r.session_id AND o.seq > r.seq
)
SELECT p.session_id, p.seq, t.turn, {_AT.format('p.recorded_at')} AS ts,
       CASE WHEN p.kind IN ('context_summarised', 'summary_failed') THEN 'summary'
            ELSE p.req->>'purpose' END AS purpose,
       p.req->>'provider' AS provider,
       coalesce(p.payload->>'model', p.req->>'model') AS model,
       p.kind IN ('model_replied', 'context_summarised') AS ok,
       p.payload->>'finish_reason' AS finish_reason,
       p.payload->>'error_type' AS error_type,
       CAST(p.payload->>'status' AS INTEGER) AS status,
       CAST(p.payload->>'latency_ms' AS DOUBLE) AS latency_ms,
       {_usage('p.payload')},
       coalesce(CAST(p.payload->'usage'->>'reasoning_in_output' AS BOOLEAN), false)
           AS reasoning_in_output,
       coalesce(CAST(p.payload->>'streamed' AS BOOLEAN), false) AS streamed
FROM paired p
ASOF LEFT JOIN starts t ON p.session_id = t.session_id AND p.seq >= t.seq
"""

_TOOL_CALLS = f"""
SELECT e.session_id, e.seq, t.turn, {_AT.format('e.recorded_at')} AS ts,
       CASE WHEN e.kind = 'tool_ran' THEN e.payload->'outcome'->>'call_id'
            ELSE e.payload->'call'->>'id' END AS call_id,
       CASE WHEN e.kind = 'tool_ran' THEN e.payload->'outcome'->>'name'
            ELSE e.payload->'call'->>'name' END AS tool,
       e.kind = 'tool_ran' AS ran,
       coalesce(CAST(e.payload->'outcome'->>'ok' AS BOOLEAN), false) AS ok,
       coalesce(e.payload->'outcome'->>'error', e.payload->>'reason') AS error,
       CAST(e.payload->'outcome'->>'duration_ms' AS DOUBLE) AS duration_ms,
       -- rules 7: what the injection scan found in the result (the model was warned)
       coalesce(json_array_length(e.payload->'outcome'->'findings'), 0) > 0 AS flagged
FROM src e
ASOF LEFT JOIN starts t ON e.session_id = t.session_id AND e.seq >= t.seq
WHERE e.kind IN ('tool_ran', 'tool_call_rejected')
"""

_RECOVERIES = f"""
SELECT e.session_id, e.seq, t.turn, {_AT.format('e.recorded_at')} AS ts,
       e.payload->>'reason' AS reason, e.payload->>'action' AS action,
       e.payload->>'detail' AS detail, CAST(e.payload->>'attempt' AS INTEGER) AS attempt,
       CAST(e.payload->>'provider_index' AS INTEGER) AS provider_index,
       e.payload->>'credential_id' AS credential_id,
       CAST(e.payload->>'retry_after' AS DOUBLE) AS retry_after
FROM src e
ASOF LEFT JOIN starts t ON e.session_id = t.session_id AND e.seq >= t.seq
WHERE e.kind = 'recovery_decided'
"""

_COMPRESSIONS = f"""
WITH parts AS (
    SELECT session_id, seq, kind, recorded_at, payload FROM src
    WHERE kind IN ('compression_planned', 'context_summarised', 'summary_failed',
                   'context_compressed')
), done AS (SELECT * FROM parts WHERE kind = 'context_compressed'),
plans AS (SELECT * FROM parts WHERE kind = 'compression_planned'),
summaries AS (SELECT * FROM parts WHERE kind IN ('context_summarised', 'summary_failed'))
SELECT d.session_id, d.seq, t.turn, {_AT.format('d.recorded_at')} AS ts,
       p.payload->>'reason' AS reason,
       CAST(p.payload->>'message_count' AS INTEGER) AS message_count,
       CAST(p.payload->>'window' AS BIGINT) AS window_tokens,
       CAST(d.payload->>'before_tokens' AS BIGINT) AS before_tokens,
       CAST(d.payload->>'after_tokens' AS BIGINT) AS after_tokens,
       CAST(d.payload->>'before_tokens' AS BIGINT)
           - CAST(d.payload->>'after_tokens' AS BIGINT) AS saved_tokens,
       CASE WHEN s.seq > p.seq THEN s.kind = 'context_summarised' ELSE false END AS summarised,
       CASE WHEN s.seq > p.seq THEN s.payload->>'model' END AS summary_model,
       CAST(d.payload->>'disabled' AS BOOLEAN) AS disabled
FROM done d
ASOF LEFT JOIN plans p ON d.session_id = p.session_id AND d.seq > p.seq
ASOF LEFT JOIN summaries s ON d.session_id = s.session_id AND d.seq > s.seq
ASOF LEFT JOIN starts t ON d.session_id = t.session_id AND d.seq >= t.seq
"""

_BODIES = {"links": _LINKS, "sessions": _SESSIONS, "turns": _TURNS, "model_calls": _MODEL_CALLS,
           "tool_calls": _TOOL_CALLS, "recoveries": _RECOVERIES, "compressions": _COMPRESSIONS}

# What each unit's view adds of the lineage (``l``) to its own columns (``u``).
_LINEAGE_COLUMNS = {
    "sessions": "l.parent_session_id, l.child_session_id AS continued_in, l.root_session_id, "
                "l.depth",
    "compressions": "l.child_session_id AS continued_in, l.root_session_id",
}

# The sessions as ``mibyan sessions`` and the chat's /sessions list them, newest first. A
# compressed session continues in a child: each row names its parent and where it went.
SESSIONS_WITH_LINEAGE = """
SELECT s.session_id, s.started_at, s.model, s.turns, s.tokens, s.status,
       l.parent_session_id AS parent, l.continued_in, l.forked_from
FROM sessions s LEFT JOIN (
    SELECT session_id,
           any_value(payload->>'parent_session_id')
               FILTER (WHERE kind = 'session_started') AS parent_session_id,
           arg_max((payload->>'origin_session_id') || '@' || (payload->>'origin_seq'), seq)
               FILTER (WHERE kind = 'session_forked') AS forked_from,
           arg_max(payload->>'child_session_id', seq)
               FILTER (WHERE kind = 'session_split') AS continued_in
    FROM events GROUP BY session_id) l USING (session_id)
ORDER BY s.started_at DESC, s.session_id DESC
"""

UNITS = ("sessions", "turns", "model_calls", "tool_calls", "recoveries", "compressions",
         "lineage")
"""The views a connection gets, besides ``events``."""


def unit_select(unit: str, source: str) -> str:
    """The rows of ``unit`` (without lineage) over the events that ``source`` selects."""
    return f"WITH src AS ({source}), starts AS ({_STARTS}) SELECT * FROM ({_BODIES[unit]})"


def create_views(con: Any, *, tables: bool = False) -> None:
    """Create (or replace) every view on ``con``, which has an ``events`` table; with
    ``tables``, over the unit tables ``refresh_units`` keeps (``u_<unit>``)."""
    def base(unit: str) -> str:
        return f"u_{unit}" if tables else f"({unit_select(unit, 'SELECT * FROM events')})"
    if tables:
        con.execute("CREATE OR REPLACE VIEW lineage AS SELECT * FROM u_lineage")
    else:
        con.execute(_LINEAGE.format(name="VIEW lineage", links=base("links")))
    for unit in _BODIES:
        if unit == "links":
            continue
        extra = _LINEAGE_COLUMNS.get(unit, "l.root_session_id")
        con.execute(f"CREATE OR REPLACE VIEW {unit} AS SELECT u.*, {extra} FROM {base(unit)} u "
                    "LEFT JOIN lineage l ON l.session_id = u.session_id")


def create_unit_tables(con: Any) -> None:
    for unit in _BODIES:
        con.execute(f"CREATE TABLE IF NOT EXISTS u_{unit} AS SELECT * FROM "
                    f"({unit_select(unit, 'SELECT * FROM events')}) LIMIT 0")
    con.execute(_LINEAGE.format(name="TABLE u_lineage", links="u_links"))


def refresh_units(con: Any, touched: str) -> None:
    """Recompute the unit tables' rows of the sessions in the table ``touched`` (the
    lineage's table, which spans sessions, is :func:`refresh_lineage`'s)."""
    # One pass over the events for all units: their sessions' records, once.
    con.execute("CREATE OR REPLACE TEMP TABLE touched_events AS SELECT * FROM events WHERE "
                f"session_id IN (SELECT session_id FROM {touched})")
    source = "SELECT * FROM touched_events"
    for unit in _BODIES:
        con.execute(f"DELETE FROM u_{unit} WHERE session_id IN "
                    f"(SELECT session_id FROM {touched})")
        con.execute(f"INSERT INTO u_{unit} {unit_select(unit, source)}")
    con.execute("DROP TABLE touched_events")


def refresh_lineage(con: Any) -> None:
    """Make the lineage's table again from the links of all sessions (a chain spans
    sessions): once an update's sessions are all refreshed, not per group of them."""
    con.execute(_LINEAGE.format(name="TABLE u_lineage", links="u_links"))
