"""Export trajectories from the event logs as training data.

    from pipeline.export.exporter import ExportFilters, export_sessions
    report = export_sessions(home / "sessions", Path("out.jsonl"), fmt="sharegpt",
                             filters=ExportFilters(completed_only=True))

Sessions are chosen in DuckDB (``pipeline.export.select``), read back event by event
(``pipeline.export.trajectory``), shaped by ``pipeline.export.formats`` and written as JSONL or
Parquet
(pyarrow, the ``export`` extra). A compressed session is exported as its lineage: the stitched
whole (``lineage="stitched"``, the default) or one sample per context segment
(``lineage="segments"``). The log is already redacted; every string of a sample goes through
the redaction once more, with the keys the logs name (the credential labels of every selected
session, looked up in the environment, gathered from the insights index before any session is
shaped) and any ``secrets`` given, before it is written: each sample is redacted in full once,
so no file on disk ever holds one that another session's key would have masked.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.envelope import list_session_ids, session_path
from effects.eventlog.store import read_envelopes
from effects.images import BlobStore, data_url
from pipeline.export.formats import FORMATS, Sample
from pipeline.export.names import LINEAGE_NAMES, OUTPUT_NAMES
from pipeline.export.parallel import Shaped, Shaping
from pipeline.export.passes import named_keys, write_shaped
from pipeline.export.select import ExportFilters, select_lineages
from pipeline.export.token_formats import TOKEN_FORMATS, TokenExportReport, export_token_sessions
from pipeline.export.tokens import Scorer
from pipeline.export.trajectory import Entry, Lineage, LogSpan, Segment, read_lineage
from pipeline.export.writers import PROVENANCE_MODES, default_provenance
from pipeline.ray_cluster import OnRay
from stages.errors import BlobMissingError, LogError, UsageError
from stages.log.content_parts import BLOB_SCHEME, ImagePart, blob_ref
from stages.log.messages import Message
from stages.log.output_spec import FINAL_TOOL
from stages.log.redact import holds_mask, redact

__all__ = ["LINEAGE_MODES", "OUTPUTS", "ExportFilters", "ExportReport", "export_sessions",
           "lineage_samples"]

LINEAGE_MODES = LINEAGE_NAMES
OUTPUTS = OUTPUT_NAMES


@attrs.frozen(kw_only=True)
class ExportReport:
    path: Path
    fmt: str
    output: str
    lineages: int
    samples: int
    session_ids: tuple[str, ...]
    # Strings the export's own redaction pass changed (0 when the log was clean, as it should).
    redacted: int = 0
    # Sessions left out because a log of theirs cannot be read: (session id, why).
    skipped: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        return (f"exported {self.samples} sample(s) from {self.lineages} session(s) as "
                f"{self.fmt} ({self.output}) to {self.path}"
                + (f"; {self.redacted} string(s) redacted on the way" if self.redacted else "")
                + "".join(f"\nskipped {sid}: {why}" for sid, why in self.skipped))


def export_sessions(root: Path, out: Path, *, fmt: str = "sharegpt",
                    filters: ExportFilters | None = None, lineage: str = "stitched",
                    output: str | None = None, secrets: Iterable[str] = (),
                    env: Mapping[str, str] | None = None, provenance: str | None = None,
                    trainable_only: bool = True, score: Scorer | None = None,
                    jobs: int | None = None, ray: OnRay | None = None
                    ) -> ExportReport | TokenExportReport:
    """Write the trajectories of the sessions under ``root`` that pass ``filters`` to ``out``.

    ``fmt`` is ``sharegpt``, ``openai`` or ``trl``; ``output`` is ``jsonl`` or ``parquet``
    (default: from the file's suffix, else JSONL); ``provenance`` is ``inline``, ``sidecar``
    or ``none`` (default: none for OpenAI, whose lines carry only the keys it documents, else
    inline, see :mod:`pipeline.export.writers`). With ``trainable_only`` (the default) a sample
    ends on the last reply the model made here with an answer (not a tool call), and a sample
    without one is left out. Raises :class:`UsageError` for an unknown
    format, output or lineage mode, an ``out`` that is a directory or cannot be written, and
    when pyarrow is missing for Parquet. The token formats (``atropos``, ``trl-tokens``,
    scored by ``score``) are :mod:`pipeline.export.token_formats`'s, of the selected sessions.
    The sessions are shaped on ``jobs`` processes (unset: one per core for a large home), or
    with ``ray`` on Ray workers; the file is the same, byte for byte, in the same order.
    """
    if fmt in TOKEN_FORMATS:
        selected = select_lineages(root, filters or ExportFilters()).roots
        return export_token_sessions(root, out, fmt=fmt, session_ids=selected, score=score,
                                     output=output)
    _check(fmt, FORMATS, "format")
    _check(lineage, LINEAGE_MODES, "lineage mode")
    output = output or ("parquet" if out.suffix == ".parquet" else "jsonl")
    _check(output, OUTPUTS, "output")
    provenance = provenance or default_provenance(fmt)
    _check(provenance, PROVENANCE_MODES, "provenance mode")
    _check_out(out)
    filters = filters or ExportFilters()
    _check_named(root, filters.session_ids)
    selection = select_lineages(root, filters)
    skipped = _unreadable(root, selection.readable, filters.session_ids)
    env = os.environ if env is None else env
    shaping = Shaping(fmt=fmt, lineage=lineage, trainable_only=trainable_only,
                      known=(*secrets, *named_keys(selection.labels, env)))
    written = write_shaped(shape_group, root, out, selection.roots, shaping, jobs=jobs,
                           ray=ray, output=output, provenance=provenance)
    skipped += written.read_errors + written.blob_errors
    return ExportReport(path=out, fmt=fmt, output=output, lineages=len(written.read),
                        samples=written.samples, session_ids=tuple(written.read),
                        redacted=written.redacted, skipped=tuple(skipped))


def shape_group(group: list[str], root: Path, shaping: Shaping) -> list[Shaped]:
    """The samples of a few sessions, in their order (a worker's task, or the whole export in
    one process): read, shaped, redacted once more, their images' bytes put in."""
    store = BlobStore.in_home(root.parent)
    return [_shape(root, session_id, shaping, store) for session_id in group]


def _shape(root: Path, session_id: str, shaping: Shaping, store: BlobStore) -> Shaped:
    try:
        item = read_lineage(root, session_id)
    except LogError as exc:  # one bad log must not keep a dataset of thousands back
        return Shaped(session_id=session_id, read_error=str(exc))
    known = list(shaping.known)
    rows, redacted = [], 0
    try:
        for sample in lineage_samples(item, lineage=shaping.lineage,
                                      trainable_only=shaping.trainable_only):
            record = FORMATS[shaping.fmt](sample)
            record, changed = _redacted(record, known)
            redacted += changed
            record["provenance"]["redactions"] = _marked(record, shaping.fmt, known)
            record["provenance"]["redacted_on_export"] = changed
            # The images' bytes go in after redaction, which is for text.
            rows.append(with_image_bytes(record, store))
    except BlobMissingError as exc:  # said in the report, the other sessions written
        return Shaped(session_id=session_id, blob_error=str(exc))
    return Shaped(session_id=session_id, rows=tuple(rows), redacted=redacted)


def _check_named(root: Path, session_ids: Iterable[str]) -> None:
    logged = set(list_session_ids(root))
    missing = [sid for sid in session_ids if sid not in logged]
    if missing:
        raise UsageError(f"no session {', '.join(map(repr, missing))} under {root}")


def _unreadable(root: Path, readable: frozenset[str],
                named: tuple[str, ...]) -> list[tuple[str, str]]:
    """The logs DuckDB found no session start in (empty, garbage, binary), with why; of those
    ``named`` only, when some are."""
    return [(sid, _why_unreadable(session_path(root, sid)))
            for sid in list_session_ids(root)
            if sid not in readable and (not named or sid in named)]


def _why_unreadable(path: Path) -> str:
    try:
        for _ in read_envelopes(path):
            pass
    except (LogError, UsageError) as exc:
        return str(exc)
    return f"{path} has no session start"


def _check(value: str, choices: Iterable[str], what: str) -> None:
    choices = tuple(choices)
    if value not in choices:
        raise UsageError(f"unknown {what} {value!r}; choose from {', '.join(choices)}")


# --- samples ----------------------------------------------------------------------------------

def lineage_samples(item: Lineage, *, lineage: str = "stitched",
                    trainable_only: bool = False) -> Iterator[Sample]:
    """The samples of one lineage: the stitched whole, or one per context segment. A sample
    ends with the last answered message: a user message after it (a segment that a
    compression closed before the reply, which the next segment holds; a turn cut by a crash)
    has nothing to train on; a sample left with no message is none. With ``trainable_only``
    it ends on the last answer the model gave here (weight 1, no tool call), and a sample
    without one is none: a trainer learns from the last message of a sample, and a tool
    result or a reply copied from elsewhere is nothing to learn."""
    if not item.segments:
        return
    if lineage == "stitched":
        samples = [_sample(item, item.stitched, item.segments[0].system_prompt, item.spans,
                           None)]
    else:
        samples = [_sample(item, segment.entries, segment.system_prompt, segment.spans, index,
                           segment) for index, segment in enumerate(item.segments)]
    if trainable_only:
        samples = [attrs.evolve(s, entries=_trainable_end(s.entries)) for s in samples]
    yield from (sample for sample in samples if sample.entries)


def _an_answer(message: Message) -> bool:
    """Text and no call, or a structured answer given through the final-answer tool."""
    if message.tool_calls:
        return all(call.name == FINAL_TOOL for call in message.tool_calls)
    return bool(message.text.strip())


def _trainable_end(entries: tuple[Entry, ...]) -> tuple[Entry, ...]:
    for end in range(len(entries), 0, -1):
        entry = entries[end - 1]
        message = entry.message
        if message.role == "assistant" and _an_answer(message) \
                and not (entry.inherited or entry.synthetic or entry.copied):
            return entries[:end]
    return ()


def _answered_end(entries: tuple[Entry, ...]) -> tuple[Entry, ...]:
    end = len(entries)
    while end and entries[end - 1].message.role == "user":
        end -= 1
    return entries[:end]


def _sample(item: Lineage, entries: tuple[Entry, ...], system_prompt: str | None,
            spans: tuple[LogSpan, ...], index: int | None,
            segment: Segment | None = None) -> Sample:
    entries, unanswered = answered(entries)
    entries = _answered_end(entries)
    inside = [(s.session_id, s.first_seq, s.last_seq) for s in spans]

    def within(session_id: str, seq: int) -> bool:
        return any(sid == session_id and lo <= seq <= hi for sid, lo, hi in inside)

    if segment is None:
        compressions = item.compressions
    else:  # the one that began the segment, if any
        compressions = () if segment.compression is None else (segment.compression,)
    used = {e.turn for e in entries if e.turn is not None}
    provenance = {
        "session_id": item.session_id,
        "segment": index,
        "spans": [attrs.asdict(s) for s in spans],
        "turns": [_turn(t) for i, t in enumerate(item.turns)
                  if i in used or within(t.session_id, t.seq)],
        "compressions": [attrs.asdict(c) for c in compressions],
        "approvals": [attrs.asdict(a) for a in item.approvals if within(a.session_id, a.seq)],
        "unanswered_calls": list(unanswered),
        "redactions": [],
        "redacted_on_export": 0,
    }
    return Sample(entries=entries, system_prompt=system_prompt, tools=item.tools,
                  provenance=provenance, completed=item.completed, model=item.model,
                  timestamp=item.started_at)


def _turn(turn: Any) -> dict[str, Any]:
    return {name: list(value) if isinstance(value, tuple) else value
            for name, value in attrs.asdict(turn).items()}


def answered(entries: Iterable[Entry]) -> tuple[tuple[Entry, ...], tuple[str, ...]]:
    """``entries`` with every tool call answered: a call whose result never came (a crash or
    an interrupt between the reply and its tools) is taken out of its message, and a result
    without its call is dropped. Ids are counted, not just matched: some servers give every
    call of a reply the same id. Returns the entries and the ids taken out."""
    items = list(entries)
    out: list[Entry] = []
    missing: list[str] = []
    for index, entry in enumerate(items):
        message = entry.message
        if message.role == "tool":
            if _open_calls(out)[message.tool_call_id] > 0:
                out.append(entry)
            continue
        if message.tool_calls:
            results = _results_after(items, index)
            kept = []
            for call in message.tool_calls:
                if results[call.id] > 0:
                    results[call.id] -= 1
                    kept.append(call)
                else:
                    missing.append(call.id)
            if len(kept) != len(message.tool_calls):
                entry = attrs.evolve(entry, message=attrs.evolve(
                    message, tool_calls=tuple(kept), content=message.content or ""))
        out.append(entry)
    return tuple(out), tuple(missing)


def _results_after(items: list[Entry], index: int) -> Counter[str | None]:
    results: Counter[str | None] = Counter()
    for entry in items[index + 1:]:
        if entry.message.role != "tool":
            break
        results[entry.message.tool_call_id] += 1
    return results


def _open_calls(out: list[Entry]) -> Counter[str | None]:
    """The calls of the last assistant message not yet answered in ``out``, by id."""
    answered_ids: Counter[str | None] = Counter()
    for entry in reversed(out):
        if entry.message.role == "tool":
            answered_ids[entry.message.tool_call_id] += 1
            continue
        if entry.message.role == "assistant":
            calls: Counter[str | None] = Counter(c.id for c in entry.message.tool_calls)
            return calls - answered_ids
        return Counter()
    return Counter()


# --- secrets ------------------------------------------------------------------------------------

def with_image_bytes(value: Any, store: BlobStore) -> Any:
    """``value`` with every stored image's ``mibyan-blob:`` address as a ``data:`` URL."""
    if isinstance(value, str):
        if not value.startswith(BLOB_SCHEME) or (ref := blob_ref(value)) is None:
            return value
        return data_url(ImagePart(sha256=ref[1], media_type=ref[0]), store).url
    if isinstance(value, dict):
        return {k: with_image_bytes(v, store) for k, v in value.items()}
    if isinstance(value, list):
        return [with_image_bytes(v, store) for v in value]
    return value


def _redacted(value: Any, known: list[str]) -> tuple[Any, int]:
    if isinstance(value, str):
        clean = redact(value, known)
        return clean, int(clean != value)
    if isinstance(value, dict):
        pairs = [(k, _redacted(v, known)) for k, v in value.items()]
        return {k: v for k, (v, _) in pairs}, sum(n for _, (_, n) in pairs)
    if isinstance(value, list):
        items = [_redacted(v, known) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


def _marked(record: dict[str, Any], fmt: str, known: list[str]) -> list[int]:
    """Positions of the sample's messages (turns, for ShareGPT) that hold a redaction mark."""
    items = record["conversations"] if fmt == "sharegpt" else record["messages"]
    return [i for i, item in enumerate(items)
            if any(holds_mask(text, known) for text in _strings(item))]


def _strings(value: Any, name: str = "") -> Iterator[str]:
    """The strings of a message (its tool calls' arguments among them), each after the name of
    its field: TRL's arguments are objects, and a field named for a secret says that a mask
    that reads as words is one."""
    if isinstance(value, str):
        yield f"{name}: {value}"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, key)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, name)


def _check_out(out: Path) -> None:
    """Before any work: ``out`` must be able to become a file."""
    if out.is_dir():
        raise UsageError(f"{out} is a directory; give the file to write, "
                         f"e.g. {out / 'trajectories.jsonl'}")
