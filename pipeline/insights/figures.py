"""What the logs say about usage: :func:`summarise` over the insights index.

    from pipeline.insights.figures import summarise
    insights = summarise(home / "sessions", days=7, model="gpt-4o-mini")
    insights.tokens["output_tokens"], insights.cost_usd, insights.as_dict()

Everything is counted from the logs' own records (through the index,
:mod:`pipeline.insights.index`),
and times are the journal clock's. ``days`` keeps what happened in the last ``days`` days before
``now`` (the real clock unless given); ``model`` keeps the sessions that used that model, and of
their model calls those of that model.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.codec import from_payload
from pipeline.insights.index import IndexReport, open_index
from pipeline.insights.prices import PriceTable
from pipeline.insights.views import TOKEN_BUCKETS
from pipeline.ray_cluster import OnRay
from stages.errors import UsageError
from stages.log.events import ModelFailed
from stages.recovery.classify import classify_api_error

__all__ = ["OUTCOMES", "Insights", "summarise"]

QUANTILES = (0.5, 0.9, 0.99)


@attrs.frozen(kw_only=True)
class Insights:
    """The figures; ``as_dict()`` is their JSON form (``mibyan insights --json``)."""

    since: str | None
    model: str | None
    sessions: int
    turns: dict[str, int]
    tokens: dict[str, int]
    cost_usd: float
    unpriced_models: tuple[str, ...]
    models: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    tool_calls: dict[str, Any]
    latency_ms: dict[str, dict[str, float | None]]
    recoveries: dict[str, int]
    # Why turns and calls failed: the turns that did not complete by exit reason, the failed
    # model calls by the classifier's reason and provider, the tools that failed most.
    failures: dict[str, tuple[dict[str, Any], ...]]
    compressions: dict[str, Any]
    by_day: tuple[dict[str, Any], ...]
    by_hour: tuple[dict[str, Any], ...]
    index: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=False, value_serializer=_plain)


def _plain(inst: object, field: object, value: Any) -> Any:
    del inst, field
    return list(value) if isinstance(value, tuple) else value


def summarise(root: Path, *, days: int | None = None, model: str | None = None,
              prices: PriceTable | None = None, now: dt.datetime | None = None,
              index: Path | None = None, rebuild: bool = False,
              jobs: int | None = None, ray: OnRay | None = None) -> Insights:
    """The insights of the logs under ``root`` (``<home>/sessions``), through the index at
    ``index`` (default ``<home>/insights.duckdb``, brought up to date first, the logs read on
    ``jobs`` processes, or with ``ray`` on Ray workers)."""
    if days is not None and days < 1:
        raise UsageError(f"days must be at least 1, got {days}")
    now = now or dt.datetime.now(dt.UTC)
    since = None if days is None else (now.astimezone(dt.UTC).replace(tzinfo=None)
                                       - dt.timedelta(days=days))
    with open_index(root, path=index, rebuild=rebuild, jobs=jobs, ray=ray) as (con, report):
        _scope(con, since, model)
        return _gather(con, since, model, prices or PriceTable(), report)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _scope(con: Any, since: dt.datetime | None, model: str | None) -> None:
    """Temporary views of what is counted: each unit in the period, of the sessions in scope."""
    when = "true" if since is None else f"ts >= TIMESTAMP '{since.isoformat(sep=' ')}'"
    sessions = "SELECT session_id FROM sessions"
    if model is not None:
        sessions = (f"SELECT session_id FROM sessions WHERE model = {_literal(model)} UNION "
                    f"SELECT session_id FROM model_calls WHERE model = {_literal(model)}")
    con.execute(f"CREATE OR REPLACE TEMP VIEW s_sessions AS {sessions}")
    only = "true" if model is None else "session_id IN (SELECT session_id FROM s_sessions)"
    for unit in ("model_calls", "tool_calls", "recoveries", "compressions"):
        extra = f" AND model = {_literal(model)}" if unit == "model_calls" and model else ""
        con.execute(f"CREATE OR REPLACE TEMP VIEW s_{unit} AS SELECT * FROM {unit} "
                    f"WHERE {when} AND {only}{extra}")
    con.execute("CREATE OR REPLACE TEMP VIEW s_turns AS SELECT *, started_at AS ts FROM turns "
                f"WHERE {when.replace('ts', 'started_at')} AND {only}")
    con.execute("CREATE OR REPLACE TEMP VIEW s_events AS SELECT * FROM events "
                f"WHERE {when.replace('ts', _TS)} AND {only}")


_TS = "timezone('UTC', CAST(recorded_at AS TIMESTAMPTZ))"


def _rows(con: Any, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _one(con: Any, sql: str) -> dict[str, Any]:
    return _rows(con, sql)[0]


def _gather(con: Any, since: dt.datetime | None, model: str | None, prices: PriceTable,
            report: IndexReport) -> Insights:
    models, unpriced = _models(con, prices)
    return Insights(
        since=None if since is None else since.isoformat() + "Z", model=model,
        sessions=_one(con, "SELECT count(DISTINCT session_id) AS n FROM s_turns")["n"],
        turns=_turns(con), tokens=_tokens(models), cost_usd=round(
            sum(m["cost_usd"] or 0.0 for m in models), 6),
        unpriced_models=unpriced, models=tuple(models), tools=tuple(_tools(con)),
        tool_calls=_tool_totals(con), latency_ms=_latency(con), recoveries=_recoveries(con),
        failures=_failures(con),
        compressions=_compressions(con), by_day=tuple(_by_day(con, prices)),
        by_hour=tuple(_rows(con, _BY_HOUR)),
        index={"logs": report.logs, "records_added": report.records_added,
               "seconds": round(report.seconds, 3),
               "problems": [f"{sid}: {p}" for sid, p in report.problems]})


_SUMS = ", ".join(f"coalesce(sum({t}), 0)::BIGINT AS {t}" for t in TOKEN_BUCKETS)


def _priced(row: dict[str, Any], prices: PriceTable) -> float | None:
    price = prices.find(row["model"])
    if price is None:
        return None
    return round(price.cost(**{t: row[t] for t in TOKEN_BUCKETS if t != "reasoning_tokens"}), 6)


def _models(con: Any, prices: PriceTable) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    rows = _rows(con, f"""
        SELECT model, count(*) AS calls, count(*) FILTER (WHERE NOT ok) AS failed,
               count(*) FILTER (WHERE purpose = 'summary') AS summaries, {_SUMS},
               count(*) FILTER (WHERE reasoning_in_output) AS reasoning_in_output_calls
        FROM s_model_calls GROUP BY model ORDER BY calls DESC, model""")
    for row in rows:
        row["cost_usd"] = _priced(row, prices)
    unpriced = tuple(r["model"] for r in rows if r["cost_usd"] is None and any(
        r[t] for t in TOKEN_BUCKETS))
    return rows, unpriced


def _tokens(models: list[dict[str, Any]]) -> dict[str, int]:
    totals = {t: sum(m[t] for m in models) for t in TOKEN_BUCKETS}
    totals["total_tokens"] = sum(v for k, v in totals.items() if k != "reasoning_tokens")
    return totals


# How a turn ended, one bucket each, so that the buckets add up to the turns: the first that
# holds, in this order (the flags can overlap: an aborted turn is also failed).
# ``incomplete``: finished without a complete answer and without a failure (a reply cut short
# that continuations could not complete, the iteration cap).
OUTCOMES = ("completed", "interrupted", "budget_exhausted", "aborted", "failed", "incomplete",
            "open")
_OUTCOME = """CASE WHEN exit_reason = 'open' THEN 'open' WHEN completed THEN 'completed'
    WHEN interrupted THEN 'interrupted' WHEN budget_exhausted THEN 'budget_exhausted'
    WHEN aborted THEN 'aborted' WHEN failed THEN 'failed' ELSE 'incomplete' END"""


def _turns(con: Any) -> dict[str, int]:
    counts = ", ".join(f"count(*) FILTER (WHERE outcome = '{o}') AS {o}" for o in OUTCOMES)
    return _one(con, f"SELECT count(*) AS turns, {counts} "
                     f"FROM (SELECT {_OUTCOME} AS outcome FROM s_turns)")


def _tools(con: Any) -> list[dict[str, Any]]:
    return _rows(con, """
        SELECT tool, count(*) AS calls, count(*) FILTER (WHERE NOT ok) AS errors,
               count(*) FILTER (WHERE NOT ran) AS rejected,
               count(*) FILTER (WHERE flagged) AS flagged,
               round(count(*) FILTER (WHERE NOT ok) / count(*), 4) AS error_rate,
               round(quantile_cont(duration_ms, 0.5), 3) AS p50_ms,
               round(quantile_cont(duration_ms, 0.9), 3) AS p90_ms
        FROM s_tool_calls GROUP BY tool ORDER BY calls DESC, tool""")


def _tool_totals(con: Any) -> dict[str, Any]:
    return _one(con, """
        SELECT count(*) AS calls, count(*) FILTER (WHERE NOT ok) AS errors,
               count(*) FILTER (WHERE NOT ran) AS rejected,
               count(*) FILTER (WHERE flagged) AS flagged,
               coalesce(round(count(*) FILTER (WHERE NOT ok) / nullif(count(*), 0), 4), 0.0)
                   AS error_rate
        FROM s_tool_calls""")


def _percentiles(con: Any, sql_values: str) -> dict[str, float | None]:
    cols = ", ".join(f"round(quantile_cont(v, {q}), 3) AS p{round(q * 100)}" for q in QUANTILES)
    return _one(con, f"SELECT {cols}, round(max(v), 3) AS max FROM ({sql_values})")


def _latency(con: Any) -> dict[str, dict[str, float | None]]:
    return {"model_calls": _percentiles(con, "SELECT latency_ms AS v FROM s_model_calls "
                                             "WHERE purpose IS DISTINCT FROM 'summary'"),
            "summaries": _percentiles(con, "SELECT latency_ms AS v FROM s_model_calls "
                                           "WHERE purpose = 'summary'"),
            "tools": _percentiles(con, "SELECT duration_ms AS v FROM s_tool_calls WHERE ran")}


_ACTIONS = {"retry": "retries", "rotate": "rotations", "fallback": "fallbacks",
            "refresh": "refreshes", "fail": "gave_up"}


def _recoveries(con: Any) -> dict[str, int]:
    counts = {row["action"]: row["n"] for row in _rows(
        con, "SELECT action, count(*) AS n FROM s_recoveries GROUP BY action")}
    out = {name: counts.pop(action, 0) for action, name in _ACTIONS.items()}
    out.update(counts)  # an action of a later rule set
    events = _one(con, """
        SELECT count(*) FILTER (WHERE kind = 'interrupted') AS interrupts,
               count(*) FILTER (WHERE kind = 'budget_exhausted') AS budget_exhaustions,
               count(*) FILTER (WHERE kind = 'model_failed') AS failed_model_calls
        FROM s_events WHERE kind IN ('interrupted', 'budget_exhausted', 'model_failed')""")
    return {**out, **events}


def _failures(con: Any) -> dict[str, tuple[dict[str, Any], ...]]:
    turns = _rows(con, """
        SELECT exit_reason, count(*) AS turns FROM s_turns
        WHERE NOT coalesce(completed, false) AND exit_reason <> 'open'
        GROUP BY exit_reason ORDER BY turns DESC, exit_reason""")
    tools = _rows(con, """
        SELECT tool, count(*) FILTER (WHERE NOT ok) AS failed, count(*) AS calls,
               mode(error) FILTER (WHERE NOT ok) AS most_common_error
        FROM s_tool_calls GROUP BY tool HAVING failed > 0
        ORDER BY failed DESC, tool LIMIT 10""")
    return {"turns": tuple(turns), "model_calls": _failed_calls(con), "tools": tuple(tools)}


def _failed_calls(con: Any) -> tuple[dict[str, Any], ...]:
    """The failed model calls by the classifier's reason, which is asked again here: a call
    that was not retried (``max_retries=0``, a fatal error) has no recovery record."""
    rows = con.execute("""
        WITH modes AS (
            SELECT session_id, arg_max(payload->'settings'->>'api_mode', seq) AS api_mode
            FROM events WHERE kind IN ('session_started', 'session_resumed', 'session_forked')
            GROUP BY session_id)
        SELECT m.provider, coalesce(a.api_mode, 'chat_completions'), e.schema_version,
               CAST(e.payload AS VARCHAR)
        FROM s_model_calls m JOIN s_events e USING (session_id, seq)
        LEFT JOIN modes a USING (session_id)
        WHERE NOT m.ok AND m.purpose IS DISTINCT FROM 'summary'""").fetchall()
    counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for provider, api_mode, version, payload in rows:
        failure = from_payload("model_failed", version, json.loads(payload))
        assert isinstance(failure, ModelFailed)
        reason = classify_api_error(failure, provider=provider or "", api_mode=api_mode).reason
        counts[(str(reason), provider, failure.error_type)] += 1
    return tuple({"reason": reason, "provider": provider, "calls": n, "error_type": error}
                 for (reason, provider, error), n in sorted(
                     counts.items(), key=lambda item: (-item[1], item[0])))


def _compressions(con: Any) -> dict[str, Any]:
    return _one(con, """
        SELECT count(*) AS count, coalesce(sum(saved_tokens), 0)::BIGINT AS saved_tokens,
               coalesce(sum(before_tokens), 0)::BIGINT AS before_tokens,
               coalesce(sum(after_tokens), 0)::BIGINT AS after_tokens,
               coalesce(round(1 - sum(after_tokens) / nullif(sum(before_tokens), 0), 4), 0.0)
                   AS saved_fraction,
               count(*) FILTER (WHERE summarised) AS summarised,
               count(continued_in) AS continued_in_child
        FROM s_compressions""")


def _by_day(con: Any, prices: PriceTable) -> list[dict[str, Any]]:
    turns = {r["day"]: r for r in _rows(con, """
        SELECT CAST(ts AS DATE) AS day, count(DISTINCT session_id) AS sessions,
               count(*) AS turns FROM s_turns GROUP BY day""")}
    days: dict[Any, dict[str, Any]] = {}
    for row in _rows(con, f"""SELECT CAST(ts AS DATE) AS day, model, count(*) AS calls, {_SUMS}
                             FROM s_model_calls GROUP BY day, model"""):
        day = days.setdefault(row["day"], {"model_calls": 0, "tokens": 0, "cost_usd": 0.0})
        day["model_calls"] += row["calls"]
        day["tokens"] += sum(row[t] for t in TOKEN_BUCKETS if t != "reasoning_tokens")
        day["cost_usd"] = round(day["cost_usd"] + (_priced(row, prices) or 0.0), 6)
    out = []
    for key in sorted(set(turns) | set(days)):
        found = turns.get(key, {"sessions": 0, "turns": 0})
        out.append({"day": key.isoformat(), "sessions": found["sessions"],
                    "turns": found["turns"],
                    **days.get(key, {"model_calls": 0, "tokens": 0, "cost_usd": 0.0})})
    return out


_BY_HOUR = """
SELECT hour(ts) AS hour, count(*) FILTER (WHERE src = 't') AS turns,
       count(*) FILTER (WHERE src = 'm') AS model_calls
FROM (SELECT ts, 't' AS src FROM s_turns UNION ALL SELECT ts, 'm' FROM s_model_calls)
GROUP BY hour ORDER BY hour
"""
