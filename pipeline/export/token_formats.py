"""Token-level export: the samples of :mod:`pipeline.export.tokens` in two trainers' shapes.

* ``atropos``: one line per group, Atropos' ``ScoredDataGroup`` (``atroposlib/envs/base.py``):
  ``tokens``, ``masks`` (the token id where it is trained, -100 elsewhere), ``scores``,
  ``advantages`` and ``ref_logprobs`` (None: the trainer computes them), ``messages`` (each
  sample's session, OpenAI-style), ``inference_logprobs`` (0.0 where masked),
  ``generation_params``, ``group_overrides`` and ``overrides`` (None). A group is the
  samples of the sessions that began with the same user message (a batch's rollouts of one
  task); a GRPO trainer compares the scores within it.
* ``trl-tokens``: one row per sample, as TRL's and prime-rl's rollout functions hand a trainer
  a generation: ``prompt_ids`` (up to the first token the model wrote), ``completion_ids``,
  ``completion_mask`` (1 on the model's tokens, 0 on tool results and user turns inside the
  completion), ``completion_logprobs``, ``score``, with ``session_id`` and ``sample``.

``score`` is any ``score(session) -> float`` (a :class:`~pipeline.export.tokens.TokenSession`
in); without one the scores are null.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.envelope import list_session_ids
from pipeline.export.tokens import Scorer, TokenSession, read_token_session
from stages.errors import UsageError

__all__ = ["IGNORED", "TOKEN_FORMATS", "TokenExportReport", "atropos_groups",
           "export_token_sessions", "trl_rows"]

IGNORED = -100  # Atropos' (and Hugging Face's) label of a token not trained on
TOKEN_FORMATS = ("atropos", "trl-tokens")


@attrs.frozen(kw_only=True)
class TokenExportReport:
    path: Path
    fmt: str
    sessions: int
    rows: int
    samples: int
    calls_without_tokens: int

    def describe(self) -> str:
        note = (f"; {self.calls_without_tokens} model call(s) had no token ids (sessions run "
                "without record_tokens, or a provider that names none)"
                if self.calls_without_tokens else "")
        return (f"exported {self.samples} token sample(s) of {self.sessions} session(s) as "
                f"{self.fmt} ({self.rows} row(s)) to {self.path}{note}")


def _scored(sessions: Iterable[TokenSession],
            score: Scorer | None) -> list[tuple[TokenSession, float | None]]:
    return [(s, None if score is None else float(score(s))) for s in sessions if s.samples]


def atropos_groups(sessions: Iterable[TokenSession],
                   score: Scorer | None = None) -> list[dict[str, Any]]:
    groups: dict[str | None, dict[str, Any]] = {}
    for session, value in _scored(sessions, score):
        group = groups.setdefault(session.group_key, {
            "tokens": [], "masks": [], "scores": [], "advantages": None, "ref_logprobs": None,
            "messages": [], "inference_logprobs": [], "generation_params": None,
            "group_overrides": None, "overrides": None})
        for sample in session.samples:
            group["tokens"].append(list(sample.tokens))
            group["masks"].append([t if m else IGNORED
                                   for t, m in zip(sample.tokens, sample.mask, strict=True)])
            group["scores"].append(value)
            group["messages"].append(list(session.messages))
            group["inference_logprobs"].append(list(sample.logprobs))
    return list(groups.values())


def trl_rows(sessions: Iterable[TokenSession],
             score: Scorer | None = None) -> list[dict[str, Any]]:
    rows = []
    for session, value in _scored(sessions, score):
        for index, sample in enumerate(session.samples):
            start = sample.mask.index(True)
            rows.append({
                "session_id": session.session_id, "sample": index,
                "prompt_ids": list(sample.tokens[:start]),
                "completion_ids": list(sample.tokens[start:]),
                "completion_mask": [int(m) for m in sample.mask[start:]],
                "completion_logprobs": list(sample.logprobs[start:]),
                "score": value})
    return rows


def export_token_sessions(root: Path, out: Path, *, fmt: str = "atropos",
                          session_ids: Iterable[str] = (), score: Scorer | None = None,
                          output: str | None = None) -> TokenExportReport:
    """Write the token samples of the sessions under ``root`` (all, or ``session_ids``) to
    ``out`` as ``fmt`` (``atropos`` or ``trl-tokens``), JSON lines or Parquet (``output``,
    else from the suffix). Sessions without token records add no row."""
    if fmt not in TOKEN_FORMATS:
        raise UsageError(f"unknown token format {fmt!r} (choose {', '.join(TOKEN_FORMATS)})")
    output = output or ("parquet" if out.suffix == ".parquet" else "jsonl")
    ids = list(session_ids) or list_session_ids(root)
    missing = sorted(set(ids) - set(list_session_ids(root)))
    if missing:
        raise UsageError(f"no session {', '.join(missing)} under {root}")
    sessions = [read_token_session(root, sid) for sid in ids]
    rows = (atropos_groups if fmt == "atropos" else trl_rows)(sessions, score)
    _write(rows, out, output)
    return TokenExportReport(path=out, fmt=fmt, sessions=len(sessions), rows=len(rows),
                             samples=sum(len(s.samples) for s in sessions),
                             calls_without_tokens=sum(s.calls_without_tokens
                                                      for s in sessions))


def _write(rows: list[dict[str, Any]], out: Path, output: str) -> None:
    if out.is_dir():
        raise UsageError(f"{out} is a directory; name the file to write")
    tmp = out.with_name(out.name + ".tmp")
    if output == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise UsageError("Parquet output needs pyarrow (pip install 'mibyan[export]')") \
                from exc
        # Messages vary in their keys from row to row: JSON text keeps one schema.
        table = pa.Table.from_pylist([{k: json.dumps(v) if k == "messages" else v
                                       for k, v in row.items()} for row in rows])
        pq.write_table(table, tmp)
    else:
        with open(tmp, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(out)
