"""``mibyan batch`` on the local process pool against the fake OpenAI server: one session per
prompt in its own working directory, resumable after a failure or a crash, then exported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from effects.eventlog.store import read_envelopes
from pipeline.batch.generate import BatchJob, finished_tasks, read_prompts, run_batch
from pipeline.cli.main import main
from stages.errors import UsageError
from tests.fake_openai import FakeOpenAIServer, Reply


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(Reply.text("an answer")) as srv:
        yield srv


def _prompts(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(n)))
    return path


def _job(tmp_path: Path, server: FakeOpenAIServer, n: int, **kw) -> BatchJob:
    kw.setdefault("workers", 2)
    return BatchJob(prompts=_prompts(tmp_path, n), out=tmp_path / "run", model="gpt-fake",
                    base_url=server.base_url, **kw)


def _task_ids(out: Path) -> dict[str, str]:
    """session id -> the task id its turn recorded."""
    ids = {}
    for path in sorted((out / "sessions").glob("*.jsonl")):
        for envelope in read_envelopes(path):
            if envelope.kind == "turn_started":
                ids[path.stem] = envelope.payload["task_id"]
    return ids


def test_each_prompt_runs_in_its_own_session_and_directory_then_exports(tmp_path,
                                                                       server) -> None:
    seen: list[tuple[int, int]] = []
    job = _job(tmp_path, server, 4)
    report = run_batch(job, progress=lambda done, total: seen.append((done, total)))
    tasks = [t.task_id for t in read_prompts(job.prompts)]
    assert (report.total, report.skipped, report.ran, report.completed) == (4, 0, 4, 4)
    assert report.failed == () and seen[-1] == (4, 4)
    assert sorted(_task_ids(job.out).values()) == sorted(tasks)
    assert sorted(p.name for p in (job.out / "work").iterdir()) == sorted(tasks)
    assert report.export is not None and report.export.samples == 4
    rows = [json.loads(line) for line in (job.out / "trajectories.sharegpt.jsonl").open()]
    questions = sorted(r["conversations"][1]["value"] for r in rows)
    assert questions == [f"question {i}" for i in range(4)]
    assert "4 prompts: 0 already done, 4 ran (4 completed)" in report.describe()


def test_a_rerun_skips_what_completed_and_retries_what_failed(tmp_path, server) -> None:
    server.script(Reply.error(400, "bad request"))  # the first session fails
    job = _job(tmp_path, server, 3, workers=1)
    first = run_batch(job)
    assert (first.ran, first.completed, len(first.failed)) == (3, 2, 1)
    assert first.export is not None and first.export.samples == 2
    second = run_batch(job)
    assert (second.skipped, second.ran, second.completed) == (2, 1, 1)
    assert second.export is not None and second.export.samples == 3
    assert finished_tasks(job.out / "sessions") == {t.task_id for t in read_prompts(job.prompts)}


def test_a_session_cut_off_by_a_crash_runs_again(tmp_path, server) -> None:
    job = _job(tmp_path, server, 2)
    run_batch(job)
    sessions = _task_ids(job.out)
    victim = sorted(sessions)[0]
    log = job.out / "sessions" / f"{victim}.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    kinds = [json.loads(line)["kind"] for line in lines]
    log.write_bytes(b"".join(lines[:kinds.index("model_requested") + 1]))  # died mid-call
    report = run_batch(job)
    assert (report.skipped, report.ran, report.completed) == (1, 1, 1)
    again = [sid for sid, task in _task_ids(job.out).items() if task == sessions[victim]]
    assert len(again) == 2 and victim in again
    assert report.export is not None and report.export.samples == 2


def test_task_ids_of_any_characters_resume_and_stay_inside_the_work_directory(
        tmp_path, server) -> None:
    """Dataset ids such as ``HumanEval/0`` name their task as they are; the working directory
    is a name made from them, always one directory below ``<out>/work``."""
    ids = ["HumanEval/0", "../../escaped", "..", "a b", 0, 7]
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i}", "task_id": task}) + "\n"
                            for i, task in enumerate(ids)))
    assert [t.task_id for t in read_prompts(path)] == [str(i) for i in ids]
    job = BatchJob(prompts=path, out=tmp_path / "deep" / "run", model="gpt-fake",
                   base_url=server.base_url, workers=2)
    report = run_batch(job)
    assert (report.ran, report.completed) == (6, 6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "prompts.jsonl"]
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["run"]
    work = list((job.out / "work").iterdir())
    assert len(work) == 6 and all(p.is_dir() for p in work)
    assert sorted(_task_ids(job.out).values()) == sorted(str(i) for i in ids)
    again = run_batch(job)
    assert (again.skipped, again.ran) == (6, 0)


def test_a_prompts_file_saved_with_a_byte_order_mark_reads(tmp_path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"prompt": "hi", "task_id": "t1"}).encode()
                     + b"\n")
    assert [(t.task_id, t.prompt) for t in read_prompts(path)] == [("t1", "hi")]


def test_a_prompts_file_not_in_utf_8_is_a_usage_error(tmp_path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_bytes('{"prompt": "café"}\n'.encode("latin-1"))
    with pytest.raises(UsageError, match=r"prompts\.jsonl: not UTF-8"):
        read_prompts(path)


@pytest.mark.parametrize(("text", "named"), [
    ("not json\n", "prompts.jsonl:1: not JSON"),
    ('{"prompt": "a"}\n{"text": "b"}\n', "prompts.jsonl:2: expected"),
    ('{"prompt": "a", "task_id": "t"}\n{"prompt": "b", "task_id": "t"}\n', "task ids repeat"),
    ('{"prompt": "a", "task_id": ""}\n', "prompts.jsonl:1: task_id must be"),
    ('{"prompt": "a", "task_id": ["t"]}\n', "prompts.jsonl:1: task_id must be"),
    ('{"prompt": "a", "system": 3}\n', "prompts.jsonl:1: system must be"),
])
def test_a_bad_prompts_file_is_a_usage_error(tmp_path, text, named) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text(text)
    with pytest.raises(UsageError, match=named):
        read_prompts(path)


def test_bad_job_settings_are_usage_errors(tmp_path, server) -> None:
    with pytest.raises(UsageError, match="backend"):
        run_batch(_job(tmp_path, server, 1, backend="slurm"))
    with pytest.raises(UsageError, match="cannot read the prompts file"):
        run_batch(BatchJob(prompts=tmp_path / "missing.jsonl", out=tmp_path / "run"))


def test_mibyan_batch_runs_and_exports(tmp_path, server, capsys) -> None:
    prompts = _prompts(tmp_path, 2)
    code = main(["batch", str(prompts), "--out", str(tmp_path / "run"), "--workers", "2",
                 "--model", "gpt-fake", "--base-url", server.base_url, "--format", "trl",
                 "--no-tools", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 prompts: 0 already done, 2 ran (2 completed)" in out
    assert len((tmp_path / "run" / "trajectories.trl.jsonl").read_text().splitlines()) == 2
