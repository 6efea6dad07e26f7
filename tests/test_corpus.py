"""Old logs keep replaying: every log in the frozen corpus verifies, folds, and replays
identically. Never regenerate a corpus file; a schema bump adds an upcaster and a new file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, verify
from pipeline.shell.replay import replay
from stages.fold import fold
from stages.log.alternation import violations

CORPUS = sorted((Path(__file__).parent / "corpus").rglob("*.jsonl"))


@pytest.mark.parametrize("log", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_log_verifies_folds_and_replays(log, tmp_path):
    session_id = next(read_envelopes(log)).session_id
    root = tmp_path / "sessions"
    root.mkdir()
    shutil.copy(log, root / f"{session_id}.jsonl")
    assert verify(root / f"{session_id}.jsonl").ok
    state = fold(from_payload(e.kind, e.schema_version, e.payload)
                 for e in read_envelopes(root / f"{session_id}.jsonl"))
    assert state.turns >= 1 and not violations(state.messages)
    report = replay(root, session_id)
    assert report.identical, report.describe()
    assert report.events == sum(1 for _ in read_envelopes(log))


def test_corpus_is_not_empty():
    assert CORPUS
