"""``--backend ray``: the same batch as Ray tasks on a local Ray (started once for the module,
it is slow to start); each task runs in a scratch directory and its logs come back to one
directory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.batch import BatchJob, run_batch
from pipeline.batch_ray import write_back
from stages.errors import LogConflictError
from tests.fake_openai import FakeOpenAIServer, Reply


def start_ray(num_cpus: int, attempts: int = 3) -> None:
    """A local Ray. Its raylet must register within a fixed 30 s, which a loaded 2-core box
    sometimes misses: the start is tried again then (it is the environment, not mibyan)."""
    import ray
    for attempt in range(attempts):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            return
        except Exception:
            ray.shutdown()
            if attempt == attempts - 1:
                raise


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    import ray
    start_ray(2)
    yield
    ray.shutdown()


def test_a_ray_batch_brings_every_log_back_and_resumes(ray_local, tmp_path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"q{i}", "task_id": f"t{i}"}) + "\n"
                               for i in range(3)))
    with FakeOpenAIServer(Reply.text("an answer")) as server:
        job = BatchJob(prompts=prompts, out=tmp_path / "run", workers=2, backend="ray",
                       model="gpt-fake", base_url=server.base_url, fmt="openai")
        report = run_batch(job)
        assert (report.ran, report.completed, report.failed) == (3, 3, ())
        logs = sorted((job.out / "sessions").glob("*.jsonl"))
        assert len(logs) == 3
        assert report.export is not None and report.export.samples == 3
        rows = [json.loads(line) for line in (job.out / "trajectories.openai.jsonl").open()]
        assert sorted(r["provenance"]["turns"][0]["task_id"] for r in rows) == ["t0", "t1", "t2"]
        again = run_batch(job)
        assert (again.skipped, again.ran) == (3, 0)


def test_a_returned_log_never_overwrites_one_already_there(tmp_path) -> None:
    write_back(tmp_path, (("s1.jsonl", b"first\n"),))
    with pytest.raises(LogConflictError, match="s1.jsonl"):
        write_back(tmp_path, (("s1.jsonl", b"second\n"),))
    assert (tmp_path / "s1.jsonl").read_bytes() == b"first\n"
