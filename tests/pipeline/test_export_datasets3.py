"""Every export format as HF ``datasets`` 3.x and 5.x load it: 5.x is the project's own, 3.6
runs in an isolated environment of its own (``uv run --with datasets==3.6.0 --isolated``,
tests/pipeline/datasets_probe.py). What each gives back must be what was exported: the
exported keys with their values, and any key another row had as null (Arrow's columns)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.export.exporter import export_sessions
from tests.pipeline.test_export_consumers import record_argument_sessions

PROBE = Path(__file__).parent / "datasets_probe.py"
FORMATS = ("sharegpt", "openai", "trl")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("datasets3")
    home = record_argument_sessions(base / "home")
    made = {}
    for fmt in FORMATS:
        for suffix in ("jsonl", "parquet"):
            made[f"{fmt}.{suffix}"] = out = base / f"{fmt}.{suffix}"
            export_sessions(home / "sessions", out, fmt=fmt)
    return made


def _exported(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.open()]


def _holds(loaded: Any, exported: Any) -> bool:
    """``loaded`` is ``exported``, but for keys that only ``loaded`` has, all null."""
    if isinstance(exported, dict):
        return isinstance(loaded, dict) and all(
            _holds(loaded.get(k), v) for k, v in exported.items()) and all(
            loaded[k] is None for k in set(loaded) - set(exported))
    if isinstance(exported, list):
        return isinstance(loaded, list) and len(loaded) == len(exported) and all(
            _holds(a, b) for a, b in zip(loaded, exported, strict=True))
    return loaded == exported


def _probe(command: list[str], files: dict[str, Path]) -> dict:
    done = subprocess.run([*command, str(PROBE), *map(str, files.values())],
                          capture_output=True, text=True, timeout=900, check=False,
                          cwd=PROBE.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_datasets_5_loads_every_format_as_exported(files):
    found = _probe([sys.executable], files)
    assert found["version"].startswith("5.")
    for name, path in files.items():
        result = found["files"][str(path)]
        assert "error" not in result, (name, result)
        assert _holds(result["rows"], _exported(path)), name


def test_datasets_3_6_loads_every_parquet_and_the_jsonl_it_can(files):
    found = _probe(["uv", "run", "--with", "datasets==3.6.0", "--isolated", "--no-project",
                    "python"], files)
    assert found["version"] == "3.6.0"
    for name, path in files.items():
        result = found["files"][str(path)]
        if name == "trl.jsonl":
            # TRL's arguments are objects (apply_chat_template wants them so); one that is a
            # string in one row and an object in another is more than datasets 3's JSON reader
            # takes. Parquet keeps them as JSON text: that is the form for datasets 3.
            assert "DatasetGenerationError" in result["error"]
            continue
        assert "error" not in result, (name, result)
        assert _holds(result["rows"], _exported(path)), name
