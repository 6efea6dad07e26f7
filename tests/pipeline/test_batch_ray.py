"""``--backend ray``: the same batch as Ray tasks on a local Ray; each task runs in a scratch
directory and its logs come back to one directory. The Ray batch runs once for the module
(Ray is slow to start), through the command line in a process of its own, so that its local Ray
(``num_cpus`` = ``--workers`` = 2) starts from a clean interpreter and ends with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from pipeline.batch.on_ray import write_back
from stages.errors import LogConflictError
from tests.fake_openai import FakeOpenAIServer, Reply

ROOT = Path(__file__).resolve().parent.parent.parent


@attrs.frozen
class RayRun:
    out: Path
    first: subprocess.CompletedProcess
    second: subprocess.CompletedProcess


def _batch(prompts: Path, out: Path, base_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli.main", "batch", str(prompts), "--out", str(out),
         "--backend", "ray", "--workers", "2", "--model", "gpt-fake", "--base-url", base_url,
         "--format", "openai", "--no-tools", "--quiet"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory) -> Iterator[RayRun]:
    tmp = tmp_path_factory.mktemp("ray")
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"q{i}", "task_id": f"t{i}"}) + "\n"
                               for i in range(3)))
    with FakeOpenAIServer(Reply.text("an answer")) as server:
        first = _batch(prompts, tmp / "run", server.base_url)
        second = _batch(prompts, tmp / "run", server.base_url)
    yield RayRun(out=tmp / "run", first=first, second=second)


def test_a_ray_batch_brings_every_log_back_to_one_directory(ray_run) -> None:
    assert ray_run.first.returncode == 0, ray_run.first.stderr[-3000:]
    assert "3 prompts: 0 already done, 3 ran (3 completed)" in ray_run.first.stdout
    assert len(sorted((ray_run.out / "sessions").glob("*.jsonl"))) == 3
    rows = [json.loads(line) for line in (ray_run.out / "trajectories.openai.jsonl").open()]
    assert all(set(r) == {"messages", "tools", "parallel_tool_calls"} for r in rows)
    sidecar = ray_run.out / "trajectories.openai.jsonl.provenance.jsonl"
    rows = [json.loads(line) for line in sidecar.open()]
    assert sorted(r["provenance"]["turns"][0]["task_id"] for r in rows) == ["t0", "t1", "t2"]
    # the working directories were scratch space on the node, not the batch directory
    assert not (ray_run.out / "work").exists()


def test_a_finished_ray_batch_resumes_with_nothing_to_do(ray_run) -> None:
    assert ray_run.second.returncode == 0, ray_run.second.stderr[-3000:]
    assert "3 prompts: 3 already done, 0 ran" in ray_run.second.stdout


def test_a_returned_log_never_overwrites_one_already_there(tmp_path) -> None:
    write_back(tmp_path, (("s1.jsonl", b"first\n"),))
    with pytest.raises(LogConflictError, match="s1.jsonl"):
        write_back(tmp_path, (("s1.jsonl", b"second\n"),))
    assert (tmp_path / "s1.jsonl").read_bytes() == b"first\n"
