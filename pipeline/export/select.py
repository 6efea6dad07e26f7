"""Which sessions to export, decided in DuckDB over the ``events`` table of
``pipeline.insights.query``.

A session compression continued in a child (``session_split``) is exported with its
descendants as one lineage, so the filters hold for the lineage as a whole: its root's start
date, all its turns, every model that served it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import attrs

from stages.errors import UsageError

__all__ = ["ExportFilters", "Selection", "select_lineages"]


def _check_turns(instance: ExportFilters, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, int) or value < 0):
        raise UsageError(f"{attribute.name} must be a whole number of at least 0, got {value!r}")


@attrs.frozen(kw_only=True)
class ExportFilters:
    """What a session (lineage) must be to be exported; every filter left at its default lets
    everything through. ``since``/``until`` are inclusive days (UTC, as the logs' clock) of the
    root session's start."""

    completed_only: bool = False
    model: str | None = None
    since: dt.date | None = None
    until: dt.date | None = None
    no_fallback: bool = False
    no_compression: bool = False
    min_turns: int | None = attrs.field(default=None, validator=_check_turns)
    max_turns: int | None = attrs.field(default=None, validator=_check_turns)
    tool: str | None = None
    task_id: str | None = None
    task_ids: tuple[str, ...] = ()
    session_ids: tuple[str, ...] = ()  # any session of a lineage names it


# Lineage roots, each session's root, and one row of facts per lineage.
_LINEAGES = """
WITH RECURSIVE splits AS (
    SELECT DISTINCT session_id AS parent, payload->>'child_session_id' AS child
    FROM events WHERE kind = 'session_split'
), known AS (SELECT DISTINCT session_id FROM events WHERE kind = 'session_started'),
edges AS (SELECT s.parent, s.child FROM splits s JOIN known k ON k.session_id = s.child),
chain(session_id, root, depth) AS (
    SELECT session_id, session_id, 0 FROM known
    WHERE session_id NOT IN (SELECT child FROM edges)
    UNION ALL
    SELECT e.child, c.root, c.depth + 1 FROM edges e JOIN chain c ON e.parent = c.session_id
    WHERE c.depth < 10000
), facts AS (
    SELECT c.root,
        min(timezone('UTC', CAST(e.payload->>'started_at' AS TIMESTAMPTZ)))
            FILTER (WHERE e.kind = 'session_started' AND c.depth = 0) AS started_at,
        count(*) FILTER (WHERE e.kind = 'turn_started') AS turns,
        count(*) FILTER (WHERE e.kind = 'turn_finished') AS finished,
        coalesce(bool_and(CAST(e.payload->>'completed' AS BOOLEAN))
            FILTER (WHERE e.kind = 'turn_finished'), false) AS all_completed,
        count(*) FILTER (WHERE e.kind = 'recovery_decided'
                         AND e.payload->>'action' = 'fallback') AS fallbacks,
        count(*) FILTER (WHERE e.kind IN ('context_compressed', 'session_split')) AS compressions,
        list(DISTINCT e.payload->>'model')
            FILTER (WHERE e.kind IN ('model_requested', 'model_replied')) AS models,
        list(DISTINCT e.payload->'settings'->>'model')
            FILTER (WHERE e.kind IN ('session_started', 'session_resumed')) AS configured,
        list(DISTINCT e.payload->'outcome'->>'name') FILTER (WHERE e.kind = 'tool_ran') AS tools,
        list(DISTINCT e.payload->>'task_id') FILTER (WHERE e.kind = 'turn_started') AS tasks,
        list(DISTINCT c.session_id) AS members,
        list(DISTINCT e.payload->>'credential_id')
            FILTER (WHERE e.kind = 'credential_selected') AS credentials
    FROM events e JOIN chain c USING (session_id)
    GROUP BY c.root
)
SELECT root, credentials FROM facts WHERE {where} ORDER BY started_at, root
"""


def _where(f: ExportFilters) -> tuple[str, list[Any]]:
    clauses: list[str] = ["true"]
    params: list[Any] = []
    checks: list[tuple[bool, str, tuple[Any, ...]]] = [
        (f.completed_only, "turns > 0 AND finished = turns AND all_completed", ()),
        (f.model is not None, "(list_contains(models, ?) OR list_contains(configured, ?))",
         (f.model, f.model)),
        (f.since is not None, "CAST(started_at AS DATE) >= ?", (f.since,)),
        (f.until is not None, "CAST(started_at AS DATE) <= ?", (f.until,)),
        (f.no_fallback, "fallbacks = 0", ()),
        (f.no_compression, "compressions = 0", ()),
        (f.min_turns is not None, "turns >= ?", (f.min_turns,)),
        (f.max_turns is not None, "turns <= ?", (f.max_turns,)),
        (f.tool is not None, "list_contains(tools, ?)", (f.tool,)),
        (f.task_id is not None, "list_contains(tasks, ?)", (f.task_id,)),
        (bool(f.task_ids), "list_has_any(tasks, ?)", (list(f.task_ids),)),
        (bool(f.session_ids), "list_has_any(members, ?)", (list(f.session_ids),)),
    ]
    for wanted, clause, values in checks:
        if wanted:
            clauses.append(clause)
            params.extend(values)
    return " AND ".join(clauses), params


@attrs.frozen
class Selection:
    """The lineages that pass the filters (root ids, oldest first), the credential labels
    their sessions chose keys by, and every session whose log DuckDB could read a start from
    (the others are unreadable, whatever the filters)."""

    roots: tuple[str, ...]
    readable: frozenset[str]
    labels: frozenset[str]


_STARTED = "SELECT DISTINCT session_id FROM events WHERE kind = 'session_started'"


def select_lineages(root: Path, filters: ExportFilters) -> Selection:
    """The lineages under ``root`` that pass ``filters``. Chosen over the insights index,
    which holds only the records that check (chain, seal, signature, a line of bounded size),
    so that one broken or forged log never keeps the others back (the reader of each lineage
    refuses a log with any bad record). The labels are known here, before any session is
    shaped, so that every sample is redacted with the keys of the whole selection at once."""
    import duckdb

    from pipeline.insights.index import open_index
    where, params = _where(filters)
    with open_index(root) as (con, _):
        try:
            rows = con.execute(_LINEAGES.format(where=where), params).fetchall()
            readable = frozenset(row[0] for row in con.execute(_STARTED).fetchall())
        except duckdb.Error as exc:
            raise UsageError(f"cannot select sessions to export: {exc}") from exc
    labels = frozenset(label for row in rows for label in row[1] or ())
    return Selection(tuple(row[0] for row in rows), readable, labels)
