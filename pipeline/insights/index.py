"""The insights index: a DuckDB file under the home holding every log's checked records.

The logs stay the source of truth; the index can be deleted or rebuilt (``rebuild=True``) at any
time. Each update looks at every log and at the last record it indexed of it, which must
still hash to what the index holds (the log is a hash chain: a log rewritten, even to the same
size with its modification time restored, fails this). One unchanged since the last update
(same size and modification time, that record intact) costs a ``stat`` and one line read; one
that grew, that record intact, has only its new tail read and chained on; any other is read
again from its start; one that is gone leaves the index. A change in place that breaks the
chain below the last indexed record passes the check: only a full read sees it. A record that
does not check (a broken chain, a changed line) ends what is indexed of its log, and the log's
problem is kept (:attr:`IndexReport.problems`).
The index has the same ``events`` table as the in-memory connection of
:func:`pipeline.insights.query.connect` and the views of :mod:`pipeline.insights.views` over it;
``mibyan sql``
queries it (:func:`pipeline.insights.query.query_index`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.envelope import (
    FIRST_KIND,
    MAX_LINE,
    SUFFIX,
    is_session_id,
    line_hash,
    session_path,
)
from effects.eventlog.keys import Keyring, keyring_of
from pipeline.insights.log_scan import Position, scan
from pipeline.insights.parallel_plan import chosen_jobs, groups_of, planned_groups
from pipeline.insights.views import (
    EVENT_COLUMNS,
    create_unit_tables,
    create_views,
    refresh_lineage,
    refresh_units,
)
from pipeline.ray_cluster import OnRay
from stages.errors import UsageError

__all__ = ["INDEX_NAME", "NO_RECORD", "IndexReport", "connect_index", "index_path", "open_index"]

INDEX_NAME = "insights.duckdb"
NO_RECORD = f"the log has no complete record, but a session log begins with {FIRST_KIND!r}"
_VERSION = 7  # of the index's own tables (and what they hold): another version is rebuilt
# DuckDB's buffer manager keeps pages up to 80 % of the machine's memory by default: indexing a
# million events held 2.5 GB, and a home ten times larger would hold more than the machine has.
# The index is a file, so pages past the limit are evicted to it (intermediates spill to its
# ``.tmp`` directory) instead of growing with the home.
MEMORY_LIMIT = "1GB"

_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (version INTEGER)",
    "CREATE TABLE IF NOT EXISTS events (session_id VARCHAR, seq BIGINT, kind VARCHAR, "
    "schema_version INTEGER, recorded_at VARCHAR, prev_hash VARCHAR, payload JSON)",
    "CREATE TABLE IF NOT EXISTS logs (session_id VARCHAR PRIMARY KEY, size BIGINT, "
    "mtime_ns BIGINT, records BIGINT, last_hash VARCHAR, last_start BIGINT, sealed BOOLEAN, "
    "problem VARCHAR, indexed_to BIGINT, signed BOOLEAN)",
)


@attrs.frozen(kw_only=True)
class IndexReport:
    """What an update did: logs seen, read from the start (``reindexed``: they were indexed
    before), continued (``appended``), left as they were, dropped; records added; problems by
    session; the logs whose records are not signed (written before logs were signed); seconds
    taken."""

    logs: int = 0
    indexed: tuple[str, ...] = ()
    reindexed: tuple[str, ...] = ()
    appended: tuple[str, ...] = ()
    unchanged: int = 0
    dropped: tuple[str, ...] = ()
    records_added: int = 0
    problems: tuple[tuple[str, str], ...] = ()
    unsigned: tuple[str, ...] = ()
    seconds: float = 0.0


def index_path(root: Path) -> Path:
    """Where the index of the logs under ``root`` (``<home>/sessions``) lives by default."""
    return Path(root).parent / INDEX_NAME


@contextlib.contextmanager
def open_index(root: Path, *, path: Path | None = None, rebuild: bool = False,
               jobs: int | None = None, ray: OnRay | None = None,
               memory_limit: str = MEMORY_LIMIT) -> Iterator[tuple[Any, IndexReport]]:
    """The index of the logs under ``root``, brought up to date (the logs read on ``jobs``
    processes; unset, one per core when there is much to read; with ``ray``, on Ray workers):
    ``(connection, report)``, closed when the block ends. DuckDB holds at most
    ``memory_limit`` (its own syntax: ``"512MB"``, ``"4GB"``)."""
    con, report = connect_index(root, path=path, rebuild=rebuild, jobs=jobs, ray=ray,
                                memory_limit=memory_limit)
    try:
        yield con, report
    finally:
        con.close()


def connect_index(root: Path, *, path: Path | None = None, rebuild: bool = False,
                  jobs: int | None = None, ray: OnRay | None = None,
                  memory_limit: str = MEMORY_LIMIT) -> tuple[Any, IndexReport]:
    """:func:`open_index` for a caller that closes the connection itself (a notebook)."""
    import duckdb
    path = Path(path) if path is not None else index_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(path))
    except duckdb.IOException as exc:
        raise UsageError(f"cannot open the insights index {path}: "
                         f"{str(exc).splitlines()[0]} (another mibyan using it?)") from exc
    except duckdb.Error as exc:
        raise UsageError(f"the insights index {path} is unreadable ({exc}); delete it, it is "
                         "rebuilt from the logs") from exc
    try:
        con.execute("SET enable_progress_bar = false")  # it would go to stdout, into --json
        _limit_memory(con, memory_limit)
        _prepare(con, rebuild)
        return con, update(con, Path(root), scratch=path.parent, jobs=jobs, ray=ray)
    except BaseException:
        con.close()
        raise


def _limit_memory(con: Any, limit: str) -> None:
    import duckdb
    try:
        con.execute("SET memory_limit = ?", [limit])
    except duckdb.Error as exc:
        raise UsageError(f"the insights index's memory limit {limit!r}: {exc}") from exc


def _prepare(con: Any, rebuild: bool) -> None:
    found = con.execute("SELECT count(*) FROM information_schema.tables "
                        "WHERE table_name = 'meta'").fetchone()[0]
    version = con.execute("SELECT max(version) FROM meta").fetchone()[0] if found else None
    if rebuild or version != _VERSION:
        tables = [row[0] for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE'").fetchall()]
        for table in tables:
            con.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')
        for statement in _TABLES:
            con.execute(statement)
        create_unit_tables(con)
        create_views(con, tables=True)  # they are kept in the file with the tables
        con.execute("INSERT INTO meta VALUES (?)", [_VERSION])


@attrs.define
class _Found:
    """What checking logs found, in the order of the logs: their bookkeeping rows, the logs
    read again from the start (their indexed records go), the logs by what was done, the
    problems, the unsigned logs, the records added. A group's is loaded and let go; the update
    keeps only the sum of what its report says (:meth:`add`)."""

    rows: list[tuple] = attrs.Factory(list)
    clear: list[str] = attrs.Factory(list)
    kinds: dict[str, list[str]] = attrs.Factory(
        lambda: {"indexed": [], "reindexed": [], "appended": []})
    problems: list[tuple[str, str]] = attrs.Factory(list)
    unsigned: list[str] = attrs.Factory(list)
    added: int = 0

    def add(self, group: _Found) -> None:
        """What a loaded group adds to the report."""
        for kind, ids in group.kinds.items():
            self.kinds[kind] += ids
        self.problems += group.problems
        self.unsigned += group.unsigned
        self.added += group.added


def update(con: Any, root: Path, *, scratch: Path, jobs: int | None = None,
           ray: OnRay | None = None) -> IndexReport:
    """Bring the index on ``con`` up to date with the logs under ``root``; the logs to read
    are checked in groups (:mod:`pipeline.insights.parallel_plan`) on ``jobs`` processes
    (unset: one per core when there is much to read), or with ``ray`` on ``jobs`` Ray workers
    (unset: one per CPU of the cluster), each group loaded as its turn comes."""
    began = time.perf_counter()
    known = {row[0]: row[1:] for row in con.execute(
        "SELECT session_id, size, mtime_ns, records, last_hash, last_start, sealed, problem, "
        "indexed_to, signed FROM logs").fetchall()}
    stats = _stats(root)
    ids = sorted(stats)
    total, unchanged, to_read = _Found(), 0, {}
    for session_id in ids:
        was = known.get(session_id)
        if was is not None and stats[session_id] == tuple(was[:2]) \
                and _still_holds(root, session_id, was):
            unchanged += 1  # the common case: a stat and one line read
            if was[6] is not None:
                total.problems.append((session_id, was[6]))
            if was[2] and not was[8]:
                total.unsigned.append(session_id)
            continue
        to_read[session_id] = stats[session_id][0]
    count = (min(ray.workers(jobs), len(to_read)) if ray is not None and to_read
             else chosen_jobs(jobs, sum(to_read.values()), len(to_read)))
    groups = ([(s, known.get(s)) for s in group] for group in groups_of(to_read, count))
    dropped = sorted(set(known) - set(ids))
    parts = Path(tempfile.mkdtemp(prefix=".scratch-", dir=scratch))
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            _replace(con, dropped, dropped, None, [])
            with contextlib.closing(planned_groups(
                    groups, _plan, _Found, root, parts, keyring_of, jobs=count,
                    ray=ray if to_read else None)) as planned:
                for part, found in planned:
                    _replace(con, [row[0] for row in found.rows], found.clear, part,
                             found.rows)
                    os.unlink(part)  # a window of groups' files at most, not the home's
                    total.add(found)
            if dropped or to_read:
                refresh_lineage(con)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    return IndexReport(logs=len(ids), indexed=tuple(total.kinds["indexed"]),
                       reindexed=tuple(total.kinds["reindexed"]),
                       appended=tuple(total.kinds["appended"]), unchanged=unchanged,
                       dropped=tuple(dropped), records_added=total.added,
                       problems=tuple(total.problems), unsigned=tuple(total.unsigned),
                       seconds=time.perf_counter() - began)


def _stats(root: Path) -> dict[str, tuple[int, int]]:
    """Each log's (size, modification time), from one pass over the directory (as
    ``list_session_ids`` finds them: regular files with a valid session id)."""
    out: dict[str, tuple[int, int]] = {}
    if not root.is_dir():
        return out
    with os.scandir(root) as entries:
        for entry in entries:
            sid = entry.name[: -len(SUFFIX)]
            if not entry.name.endswith(SUFFIX) or not is_session_id(sid):
                continue
            try:
                if entry.is_file():
                    stat = entry.stat()
                    out[sid] = (stat.st_size, stat.st_mtime_ns)
            except OSError:
                continue  # removed while we looked
    return out



def _plan(out: Any, found: _Found, root: Path, session_id: str, known: tuple | None,
          keyring: Keyring) -> None:
    """Check one log from where the index left it: its checked lines to ``out``, its
    bookkeeping to ``found``."""
    path = session_path(root, session_id)
    mark = out.tell()
    try:
        with open(path, "rb", buffering=1 << 16) as fh:
            stat = os.fstat(fh.fileno())
            start = _continues(fh, known, stat.st_size)
            fh.seek(start.offset)
            checked = scan(fh, session_id, start, keyring)
            _copy(fh, start.offset, checked.position.offset, out)
    except OSError:
        # Removed or cut while we looked: what was copied of it goes, the next update sees it.
        out.seek(mark)
        out.truncate()
        return
    pos = checked.position
    if start.offset == 0:
        if known is not None:
            found.clear.append(session_id)
        found.kinds["reindexed" if known is not None else "indexed"].append(session_id)
    else:
        found.kinds["appended"].append(session_id)
    found.added += pos.records - start.records
    # A log with no record at all (empty, or one line without its newline) is no session:
    # named like a broken one, or `insights` and `sql` would leave it out without a word.
    problem = checked.problem if pos.records else checked.problem or NO_RECORD
    if problem is not None:
        found.problems.append((session_id, problem))
    if pos.records and not pos.signed:
        found.unsigned.append(session_id)
    found.rows.append((session_id, stat.st_size, stat.st_mtime_ns, pos.records, pos.last_hash,
                      pos.last_start, pos.sealed, problem, pos.offset, pos.signed))


def _copy(fh: Any, start: int, end: int, out: Any) -> None:
    """The checked bytes (whole lines) of a log to the scratch file."""
    fh.seek(start)
    while start < end:
        chunk = fh.read(min(1 << 20, end - start))
        if not chunk:
            raise OSError("the log shrank while it was read")
        out.write(chunk)
        start += len(chunk)


def _continues(fh: Any, known: tuple | None, size: int) -> Position:
    """Where to go on reading: after the indexed records if the log grew and the last one is
    still there, unchanged; else (it was rewritten, cut, or broken) from the start."""
    if known is None or known[6] is not None or known[2] == 0 or size <= known[7] \
            or not _last_holds(fh, known):
        return Position()
    _, _, records, last_hash, last_start, sealed, _, end, signed = known
    return Position(records, end, last_hash, last_start, sealed, signed)


def _still_holds(root: Path, session_id: str, known: tuple) -> bool:
    """Whether a log whose size and time are as indexed still holds what was indexed: a copy
    or an edit can restore both over other bytes."""
    try:
        with open(session_path(root, session_id), "rb") as fh:
            return _last_holds(fh, known)
    except OSError:
        return False  # gone or unreadable: the full look decides


def _last_holds(fh: Any, known: tuple) -> bool:
    """Whether the last indexed line is where it was and still hashes to the stored hash. Each
    line holds the hash of the one before, so a log rewritten consistently (chained anew) fails
    this; only a change that breaks the chain below the last line passes it, and only a full
    read sees that (``rebuild``, ``mibyan log verify``)."""
    _, _, records, last_hash, last_start, _, _, end, _ = known
    if records == 0:
        return True  # nothing indexed that could have gone stale
    fh.seek(last_start)
    last = fh.read(end - last_start)
    return last.endswith(b"\n") and line_hash(last[:-1]) == last_hash


_LOG_COLUMNS = ("session_id", "size", "mtime_ns", "records", "last_hash", "last_start",
                "sealed", "problem", "indexed_to", "signed")


def _replace(con: Any, touched: list[str], clear: list[str], part: str | None,
             rows: list[tuple]) -> None:
    """The index's records of the logs in ``clear`` go, the checked records in the scratch
    file ``part`` are added, the bookkeeping of the logs ``touched`` becomes ``rows``, and
    their units are made again: a group of logs (or the logs gone) at a time."""
    if not touched:
        return
    con.execute("CREATE OR REPLACE TEMP TABLE touched AS SELECT unnest(?::VARCHAR[]) AS "
                "session_id", [touched])
    if clear:
        con.execute("DELETE FROM events WHERE session_id IN (SELECT unnest(?::VARCHAR[]))",
                    [clear])
    con.execute("DELETE FROM logs WHERE session_id IN (SELECT session_id FROM touched)")
    if part is not None:
        con.execute("INSERT INTO events SELECT session_id, seq, kind, schema_version, "
                    f"recorded_at, prev_hash, payload FROM {_read_json(part)}")
    if rows:
        con.execute("INSERT INTO logs SELECT unnest(?, recursive := true)",
                    [[dict(zip(_LOG_COLUMNS, row, strict=True)) for row in rows]])
    refresh_units(con, "touched")
    con.execute("DROP TABLE touched")


def _read_json(path: str) -> str:
    quoted = "'" + path.replace("'", "''") + "'"
    return (f"read_json({quoted}, format='newline_delimited', columns={EVENT_COLUMNS}, "
            f"maximum_object_size={MAX_LINE + 1})")
