"""One task of a batch and how it runs: the job's settings, a prompt, and the session that
answers it in a working directory of its own. Both backends run :func:`run_task`, the local
pool here and Ray in :mod:`pipeline.batch.on_ray`; :mod:`pipeline.batch.generate` plans the batch
around it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import attrs

from stages.errors import MibyanError

__all__ = ["BatchJob", "Task", "TaskResult", "digest", "run_task", "work_dir_name"]


@attrs.frozen(kw_only=True)
class Task:
    task_id: str
    prompt: str
    system: str | None = None


@attrs.frozen(kw_only=True)
class BatchJob:
    """A batch: the prompts file, the output directory, and how each session runs. Model
    settings not given here come from the environment (``OPENAI_API_KEY``, ``MIBYAN_MODEL``,
    ...), as for ``mibyan run``."""

    prompts: Path
    out: Path
    workers: int = 1
    backend: str = "local"
    model: str | None = None
    base_url: str | None = None
    provider: str | None = None
    api_mode: str | None = None
    max_turns: int = 30
    toolsets: tuple[str, ...] | None = None  # None: no tools
    fmt: str = "sharegpt"
    ray_address: str | None = None
    # Record token ids and logprobs (else config.toml's [model] record_tokens decides).
    record_tokens: bool = False
    # The tokenizer that tokenises the prompts (else config.toml's [tokens] tokenizer).
    tokenizer: str | None = None


@attrs.frozen(kw_only=True)
class TaskResult:
    task_id: str
    session_id: str | None
    completed: bool
    error: str | None = None
    # Ray: the logs of the task's sessions ({file name: bytes}), written back by the driver.
    logs: tuple[tuple[str, bytes], ...] = ()


def digest(text: str) -> str:
    """Ten hex digits of the text's SHA-256: short, and stable across runs."""
    return hashlib.sha256(text.encode()).hexdigest()[:10]


_DIR_NAME = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,99}")


def work_dir_name(task_id: str) -> str:
    """The task's working directory under ``<out>/work``: the id itself when it is a plain
    file name; else (dataset ids like ``HumanEval/0``, ``..``) its plain characters and a
    digest of it, so that no id reaches outside and no two ids share a directory."""
    if _DIR_NAME.fullmatch(task_id):
        return task_id
    plain = re.sub(r"[^A-Za-z0-9_\-]+", "_", task_id).strip("_")[:60]
    return f"{plain}_{digest(task_id)}" if plain else f"task_{digest(task_id)}"


def run_task(job: BatchJob, task: Task, home: Path | None = None) -> TaskResult:
    """Run one prompt in a session of its own (in a worker process)."""
    from pipeline.agent import Agent
    home = home or job.out
    workdir = home / "work" / work_dir_name(task.task_id)
    workdir.mkdir(parents=True, exist_ok=True)
    tools: Any = ()
    if job.toolsets is not None:
        from pipeline.toolsets import builtin_tools
        tools = builtin_tools(workdir, toolsets=job.toolsets)
    try:
        with Agent(model=job.model, base_url=job.base_url, provider=job.provider,
                   api_mode=job.api_mode, tools=tools, home=home, cwd=workdir,
                   max_turns=job.max_turns, stream=False, durability="flush",
                   record_tokens=job.record_tokens or None,
                   tokenizer=job.tokenizer) as agent:
            result = agent.run(task.prompt, task.system, task_id=task.task_id)
    except MibyanError as exc:
        return TaskResult(task_id=task.task_id, session_id=None, completed=False,
                          error=f"{type(exc).__name__}: {exc}")
    return TaskResult(task_id=task.task_id, session_id=result.session_id,
                      completed=result.completed, error=result.error)
