"""The SQL views over ``events`` (one row per envelope): one view per natural unit of a session.

``sessions``, ``turns``, ``model_calls``, ``tool_calls``, ``recoveries``, ``compressions``, and
``lineage`` (a compressed session goes on in a child session: every unit names the session its
chain started in, ``root_session_id``). The same views sit on the in-memory connection of
``mibyan sql`` (:mod:`pipeline.query`) and on the insights index (:mod:`pipeline.index`); each is
plain SQL over ``events``, so whatever holds that table gets them. Times are the journal clock's
``recorded_at`` (and ``started_at`` of a turn), as UTC ``TIMESTAMP`` values.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOKEN_BUCKETS", "UNITS", "VIEWS", "create_views"]

_AT = "timezone('UTC', CAST({} AS TIMESTAMPTZ))"
TOKEN_BUCKETS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
           "reasoning_tokens")


def _usage(source: str) -> str:
    return ",\n       ".join(f"coalesce(CAST({source}->'usage'->>'{t}' AS BIGINT), 0) AS {t}"
                            for t in TOKEN_BUCKETS)


_LINEAGE = """
CREATE OR REPLACE VIEW lineage AS
WITH RECURSIVE links AS (
    SELECT session_id,
           any_value(payload->>'parent_session_id')
               FILTER (WHERE kind = 'session_started') AS parent_session_id,
           arg_max(payload->>'child_session_id', seq)
               FILTER (WHERE kind = 'session_split') AS child_session_id
    FROM events WHERE kind IN ('session_started', 'session_split') GROUP BY session_id
), chain(session_id, root_session_id, depth, path) AS (
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
CREATE OR REPLACE VIEW sessions AS
WITH usage AS (
    SELECT session_id,
           sum(CAST(payload->'usage'->>'input_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'output_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'cache_read_tokens' AS BIGINT)
               + CAST(payload->'usage'->>'cache_write_tokens' AS BIGINT)) AS tokens,
           count(*) AS api_calls
    FROM events WHERE kind = 'model_replied' GROUP BY session_id
), base AS (
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
       max(e.recorded_at) AS last_event_at,
       count(*) AS events
FROM events e LEFT JOIN usage u USING (session_id)
GROUP BY e.session_id
)
SELECT b.*, l.parent_session_id, l.child_session_id AS continued_in, l.root_session_id,
       l.depth
FROM base b LEFT JOIN lineage l USING (session_id)
"""

# Where each turn starts: the events of a session after it (to the next start) belong to it.
_TURN_STARTS = """
CREATE OR REPLACE VIEW _turn_starts AS
SELECT session_id, seq, payload->>'turn_id' AS turn_id,
       row_number() OVER (PARTITION BY session_id ORDER BY seq) AS turn
FROM events WHERE kind = 'turn_started'
"""

_TURNS = f"""
CREATE OR REPLACE VIEW turns AS
WITH starts AS (
    SELECT e.session_id, e.seq, s.turn, s.turn_id, e.payload->>'task_id' AS task_id,
           {_AT.format("e.payload->>'started_at'")} AS started_at
    FROM events e JOIN _turn_starts s USING (session_id, seq)
), marks AS (
    SELECT e.session_id, e.seq, e.kind, e.payload, {_AT.format('e.recorded_at')} AS ts, s.turn
    FROM events e ASOF JOIN _turn_starts s ON e.session_id = s.session_id AND e.seq >= s.seq
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
       coalesce(p.tokens, 0) AS tokens, l.root_session_id
FROM starts s LEFT JOIN per_turn p USING (session_id, turn)
LEFT JOIN lineage l USING (session_id)
"""

# A model call is its outcome (a reply or a failure) with the request before it; a summary
# written for compression is a model call with the purpose ``summary``.
_MODEL_CALLS = f"""
CREATE OR REPLACE VIEW model_calls AS
WITH requests AS (
    SELECT session_id, seq, payload FROM events WHERE kind = 'model_requested'
), outcomes AS (
    SELECT session_id, seq, kind, recorded_at, payload FROM events
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
       coalesce(CAST(p.payload->>'streamed' AS BOOLEAN), false) AS streamed,
       l.root_session_id
FROM paired p
ASOF LEFT JOIN _turn_starts t ON p.session_id = t.session_id AND p.seq >= t.seq
LEFT JOIN lineage l ON l.session_id = p.session_id
"""

_TOOL_CALLS = f"""
CREATE OR REPLACE VIEW tool_calls AS
SELECT e.session_id, e.seq, t.turn, {_AT.format('e.recorded_at')} AS ts,
       CASE WHEN e.kind = 'tool_ran' THEN e.payload->'outcome'->>'call_id'
            ELSE e.payload->'call'->>'id' END AS call_id,
       CASE WHEN e.kind = 'tool_ran' THEN e.payload->'outcome'->>'name'
            ELSE e.payload->'call'->>'name' END AS tool,
       e.kind = 'tool_ran' AS ran,
       coalesce(CAST(e.payload->'outcome'->>'ok' AS BOOLEAN), false) AS ok,
       coalesce(e.payload->'outcome'->>'error', e.payload->>'reason') AS error,
       CAST(e.payload->'outcome'->>'duration_ms' AS DOUBLE) AS duration_ms,
       l.root_session_id
FROM events e
ASOF LEFT JOIN _turn_starts t ON e.session_id = t.session_id AND e.seq >= t.seq
LEFT JOIN lineage l ON l.session_id = e.session_id
WHERE e.kind IN ('tool_ran', 'tool_call_rejected')
"""

_RECOVERIES = f"""
CREATE OR REPLACE VIEW recoveries AS
SELECT e.session_id, e.seq, t.turn, {_AT.format('e.recorded_at')} AS ts,
       e.payload->>'reason' AS reason, e.payload->>'action' AS action,
       e.payload->>'detail' AS detail, CAST(e.payload->>'attempt' AS INTEGER) AS attempt,
       CAST(e.payload->>'provider_index' AS INTEGER) AS provider_index,
       e.payload->>'credential_id' AS credential_id,
       CAST(e.payload->>'retry_after' AS DOUBLE) AS retry_after,
       l.root_session_id
FROM events e
ASOF LEFT JOIN _turn_starts t ON e.session_id = t.session_id AND e.seq >= t.seq
LEFT JOIN lineage l ON l.session_id = e.session_id
WHERE e.kind = 'recovery_decided'
"""

# A compression: the plan, the summary written for it (if any), and the result.
_COMPRESSIONS = f"""
CREATE OR REPLACE VIEW compressions AS
WITH parts AS (
    SELECT session_id, seq, kind, recorded_at, payload FROM events
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
       CAST(d.payload->>'disabled' AS BOOLEAN) AS disabled,
       l.child_session_id AS continued_in, l.root_session_id
FROM done d
ASOF LEFT JOIN plans p ON d.session_id = p.session_id AND d.seq > p.seq
ASOF LEFT JOIN summaries s ON d.session_id = s.session_id AND d.seq > s.seq
ASOF LEFT JOIN _turn_starts t ON d.session_id = t.session_id AND d.seq >= t.seq
LEFT JOIN lineage l ON l.session_id = d.session_id
"""

UNITS = ("sessions", "turns", "model_calls", "tool_calls", "recoveries", "compressions",
         "lineage")
"""The views a connection gets, besides ``events``."""

VIEWS = (_LINEAGE, _SESSIONS, _TURN_STARTS, _TURNS, _MODEL_CALLS, _TOOL_CALLS, _RECOVERIES,
         _COMPRESSIONS)


def create_views(con: Any) -> None:
    """Create (or replace) every view on ``con``, which must have an ``events`` table."""
    for statement in VIEWS:
        con.execute(statement)
