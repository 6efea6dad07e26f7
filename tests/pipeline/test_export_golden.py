"""Golden files: one recorded session (scripted model, fake clock, counting ids) exported in
each format must match ``tests/golden/export/`` exactly. The log hash is checked against the
log and stands as ``<log hash>`` in the files, so that a change of what a session's first
event records does not rewrite them. Regenerate after an intended change with
``MIBYAN_REGENERATE_GOLDEN=1 pytest tests/pipeline/test_export_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from effects.eventlog.envelope import session_path, strict_lines
from effects.eventlog.keys import keyring_of
from pipeline.export.exporter import export_sessions
from tests.pipeline.export_sessions import tool_session

GOLDEN = Path(__file__).parent.parent / "golden" / "export"


def _normalised(row: dict, root: Path) -> dict:
    # OpenAI's lines carry no provenance by default (only the keys OpenAI documents).
    for span in row["provenance"]["spans"] if "provenance" in row else ():
        path = session_path(root, span["session_id"])
        with open(path, "rb") as fh:
            digests = {line.seq: line.digest for line in strict_lines(
                fh, span["session_id"], path, keyring_of(root))}
        assert span["log_hash"] == digests[span["last_seq"]]
        span["log_hash"] = "<log hash>"
    return row


@pytest.mark.parametrize("fmt", ["sharegpt", "openai", "trl"])
def test_export_matches_the_golden_file(tmp_path, fmt) -> None:
    tool_session(tmp_path)
    out = tmp_path / "out.jsonl"
    export_sessions(tmp_path / "sessions", out, fmt=fmt)
    rows = [_normalised(json.loads(line), tmp_path / "sessions") for line in out.open()]
    text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True, indent=1) + "\n"
                   for row in rows)
    golden = GOLDEN / f"{fmt}.json"
    if os.environ.get("MIBYAN_REGENERATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")
