"""Running tools: the effect that executes validated calls and reports their outcomes.

A runner never raises because of a tool: a handler that raises, arguments that do not validate
and an unknown name all become ``ToolOutcome(ok=False)`` with a JSON ``{"error": ...}`` content.
Outcomes come back in the order of the calls, whatever order they finish in.

The runner knows tools only through :class:`ToolLookup` (``pipeline.tools.ToolRegistry``
satisfies it), so this module does not depend on the pipeline.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import attrs

from effects.logs import get_logger
from stages.log.messages import canonical_arguments, canonical_json
from stages.log.redact import redact
from stages.log.tool_specs import ToolInvocation, ToolOutcome

__all__ = [
    "INTERRUPTED_ERROR",
    "LEGACY_SPILL_DIR",
    "MAX_RESULT_CHARS",
    "MAX_TOOL_WORKERS",
    "PREVIEW_CHARS",
    "RUNNING_INTERRUPT",
    "SPILL_DIR",
    "SPILL_MAX_AGE_S",
    "InvocableTool",
    "ScriptedToolRunner",
    "ScriptedToolStep",
    "ThreadPoolToolRunner",
    "ToolHooks",
    "ToolLookup",
    "ToolRunner",
    "error_content",
    "private_directory",
    "remove_legacy_spill_dir",
    "render_result",
    "spill",
    "spill_path",
    "sweep",
]

MAX_TOOL_WORKERS = 8
INTERRUPTED_ERROR = "skipped: interrupted by user"
# The interrupt of the batch a tool runs in, for tools that can stop part way (a shell command).
RUNNING_INTERRUPT: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "mibyan_running_interrupt", default=None)
# A result longer than this reaches the model (and the log) as a preview; the whole text is
# kept in a file under SPILL_DIR that the model can read in pieces. The directory is the user's
# own (0700) because the temp directory is shared; the files are redacted like the log, and go
# when the runner closes (the agent's end) or, left by a process that died, after a day.
MAX_RESULT_CHARS = 100_000
PREVIEW_CHARS = 2_000
SPILL_DIR = Path(tempfile.gettempdir()) / f"mibyan-tool-results-{os.getuid()}"
SPILL_MAX_AGE_S = 24 * 3600
# Where earlier versions kept them: one directory for every user, world-readable, never emptied.
LEGACY_SPILL_DIR = Path(tempfile.gettempdir()) / "mibyan-tool-results"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")

log = get_logger(__name__)


class ToolRunner(Protocol):
    """Runs a batch of validated tool calls; outcomes are in the order of ``calls``."""

    def run(
        self, calls: Sequence[ToolInvocation], *, concurrent: bool, task_id: str
    ) -> tuple[ToolOutcome, ...]: ...


class ToolHooks(Protocol):
    """Plugin hooks around each call (``pipeline.hooks.Hooks``): ``before_tool`` returns a
    reason to block the call, or None."""

    def before_tool(self, call: ToolInvocation, task_id: str) -> str | None: ...

    def after_tool(self, call: ToolInvocation, outcome: ToolOutcome, task_id: str) -> None: ...


class InvocableTool(Protocol):
    def invoke(self, arguments: str, *, task_id: str) -> object: ...


class ToolLookup(Protocol):
    def get(self, name: str) -> InvocableTool | None: ...


def render_result(result: object) -> str:
    """What the model reads: str as is, None as "", anything else canonical JSON (or str())."""
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    try:
        return canonical_json(result)
    except (TypeError, ValueError, RecursionError):
        return str(result)


def error_content(error: str) -> str:
    return canonical_json({"error": error})


def spill(content: str, *, name: str, directory: Path, limit: int,
          secrets: Iterable[str] = ()) -> str:
    """``content`` when it fits in ``limit``; else a preview with a marker naming the file that
    now holds all of it, redacted with ``secrets`` as the journal redacts the log (the file
    must not keep what the log would not)."""
    if len(content) <= limit:
        return content
    content = redact(content, secrets)
    preview = content[:min(PREVIEW_CHARS, limit)]
    lines = content.count("\n") + 1
    try:
        path = _write_private(spill_path(directory, name), content)
    except OSError as exc:
        log.warning("tool.spill_failed", directory=str(directory), error=str(exc))
        return (f"{preview}\n\n[output truncated: {len(content)} characters, {lines} lines in "
                f"all; the rest could not be kept ({exc})]")
    return (f"{preview}\n\n[output truncated: {len(content)} characters, {lines} lines in all; "
            f"the whole output is in {path}; read it with read_file and offset/limit]")


def private_directory(directory: Path) -> Path:
    """``directory``, made 0700 if missing; an OSError unless it is a real directory of this
    user (in a shared temp directory another user could have made it, or a symlink, first)."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700, parents=True)
    found = os.lstat(directory)
    if not _ours(found):
        raise OSError(f"{directory} is not a directory of this user; not writing there")
    if stat.S_IMODE(found.st_mode) & 0o077:
        os.chmod(directory, 0o700)
    return directory


def _ours(found: os.stat_result) -> bool:
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()


def spill_path(directory: Path, name: str) -> Path:
    """Where :func:`spill` keeps the result called ``name``."""
    return directory / f"{_UNSAFE.sub('_', name)[:120]}.txt"


def _write_private(path: Path, content: str) -> Path:
    private_directory(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fd, 0o600)
        fh.write(content)
    return path


def sweep(directory: Path, *, max_age_s: float = SPILL_MAX_AGE_S,
          now: float | None = None) -> None:
    """Remove the files of ``directory`` older than ``max_age_s`` (those of runners that never
    closed: a process that died)."""
    cutoff = (time.time() if now is None else now) - max_age_s
    try:
        if not _ours(os.lstat(directory)):
            return  # a symlink planted there could point at anyone's files
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat(
                    follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
        except OSError:
            continue


def remove_legacy_spill_dir(directory: Path | None = None) -> None:
    """Remove the world-readable directory of oversized results that earlier versions left
    (``LEGACY_SPILL_DIR``) when it is ours: a real directory (not a symlink) of this user.
    Another user's is theirs to remove; a failure leaves what could not be removed."""
    directory = LEGACY_SPILL_DIR if directory is None else directory
    try:
        if not _ours(os.lstat(directory)):
            return
    except OSError:
        return
    # rmtree removes a symlink inside as a link, never what it points at.
    shutil.rmtree(directory, ignore_errors=True)


def _describe(exc: BaseException) -> str:
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _failure(call: ToolInvocation, error: str, duration_ms: float = 0.0) -> ToolOutcome:
    return ToolOutcome(call_id=call.call_id, name=call.name, content=error_content(error),
                       ok=False, error=error, duration_ms=duration_ms)


class ThreadPoolToolRunner:
    """The real runner: handlers run in the caller's thread or in a shared thread pool.

    One call, or ``concurrent=False``: one after another in the calling thread. Several calls
    with ``concurrent=True``: a ``ThreadPoolExecutor`` of at most ``max_workers`` threads
    (created on first use, reused, stopped by :meth:`shutdown`), each call in a copy of the
    caller's ``contextvars`` context. When ``interrupt`` is set, calls not yet started are
    skipped with an error outcome; calls already running finish. A result over
    ``max_result_chars`` is cut to a preview and kept whole, redacted with ``secrets``, in a
    file under ``spill_dir``; :meth:`close` removes this runner's files (and any there older
    than a day).
    """

    def __init__(
        self,
        registry: ToolLookup,
        *,
        interrupt: threading.Event | None = None,
        max_workers: int = MAX_TOOL_WORKERS,
        max_result_chars: int = MAX_RESULT_CHARS,
        spill_dir: Path = SPILL_DIR,
        hooks: ToolHooks | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        self._registry = registry
        self._secrets = secrets
        self._spilled: set[Path] = set()
        self._hooks = hooks
        self._max_result_chars = max_result_chars
        self._spill_dir = spill_dir
        self._interrupt = interrupt
        self._max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def run(
        self, calls: Sequence[ToolInvocation], *, concurrent: bool, task_id: str
    ) -> tuple[ToolOutcome, ...]:
        calls = tuple(calls)
        parallel = concurrent and len(calls) > 1
        log.debug("tools.batch", count=len(calls), concurrent=parallel, task_id=task_id)
        if not parallel:
            return tuple(self._run_one(call, task_id) for call in calls)
        pool = self._executor()
        futures = [pool.submit(contextvars.copy_context().run, self._run_one, call, task_id)
                   for call in calls]
        return tuple(future.result() for future in futures)

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop the pool's threads; a later concurrent batch starts a new pool."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=True)

    def close(self) -> None:
        """Stop the pool and remove the files of this runner's oversized results: the session
        that read them is over."""
        self.shutdown()
        with self._lock:
            spilled, self._spilled = self._spilled, set()
        for path in spilled:
            path.unlink(missing_ok=True)
        sweep(self._spill_dir)
        remove_legacy_spill_dir()

    def __enter__(self) -> ThreadPoolToolRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self._max_workers, thread_name_prefix="mibyan-tool")
            return self._pool

    def _run_one(self, call: ToolInvocation, task_id: str) -> ToolOutcome:
        if self._interrupt is not None and self._interrupt.is_set():
            log.debug("tool.skipped", call_id=call.call_id, name=call.name)
            return _failure(call, INTERRUPTED_ERROR)
        found = self._registry.get(call.name)
        if found is None:
            return _failure(call, f"unknown tool: {call.name}")
        blocked = self._hooks.before_tool(call, task_id) if self._hooks is not None else None
        if blocked is not None:
            log.info("tool.blocked", call_id=call.call_id, name=call.name)
            return _failure(call, f"blocked by a plugin: {blocked}")
        outcome = self._invoke(found, call, task_id)
        log.debug("tool.finished", call_id=call.call_id, name=call.name, ok=outcome.ok,
                  duration_ms=round(outcome.duration_ms, 3), error=outcome.error)
        if self._hooks is not None:
            self._hooks.after_tool(call, outcome, task_id)
        return outcome


    def _invoke(self, found: InvocableTool, call: ToolInvocation, task_id: str) -> ToolOutcome:
        start = time.perf_counter()
        token = RUNNING_INTERRUPT.set(self._interrupt)
        name = f"{task_id}-{call.call_id}"
        try:
            rendered = render_result(found.invoke(call.arguments, task_id=task_id))
            content = spill(rendered, name=name, directory=self._spill_dir,
                            limit=self._max_result_chars, secrets=self._secrets)
        except Exception as exc:
            return _failure(call, _describe(exc), _elapsed_ms(start))
        finally:
            RUNNING_INTERRUPT.reset(token)
        if len(rendered) > self._max_result_chars:
            with self._lock:
                self._spilled.add(spill_path(self._spill_dir, name))
        return ToolOutcome(call_id=call.call_id, name=call.name, content=content, ok=True,
                           duration_ms=_elapsed_ms(start))


def _elapsed_ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


# --- scripted runner for tests -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ScriptedToolStep:
    """One expected call: ``arguments`` is JSON text compared canonically, or None for any."""

    name: str
    arguments: str | None
    content: str
    ok: bool = True


def _as_step(step: ScriptedToolStep | Sequence[object] | Mapping[str, object]) -> ScriptedToolStep:
    if isinstance(step, ScriptedToolStep):
        return step
    if isinstance(step, Mapping):
        return ScriptedToolStep(**step)  # type: ignore[arg-type]
    name, arguments, content, *rest = step
    if isinstance(arguments, Mapping):
        arguments = json.dumps(arguments)
    return ScriptedToolStep(name=name, arguments=arguments, content=content,  # type: ignore[arg-type]
                            ok=bool(rest[0]) if rest else True)


class ScriptedToolRunner:
    """A strict test double: each call must match the next scripted step.

    Steps are :class:`ScriptedToolStep` or tuples ``(name, arguments_json_or_None, content[, ok])``.
    An unexpected call raises AssertionError; :meth:`assert_complete` fails on unused steps.
    ``calls`` and ``batches`` record what was asked.
    """

    def __init__(self, steps: Iterable[ScriptedToolStep | Sequence[object]]) -> None:
        self._steps = tuple(_as_step(step) for step in steps)
        self._next = 0
        self._lock = threading.Lock()
        self.calls: list[ToolInvocation] = []
        self.failures: list[str] = []
        self.batches: list[tuple[tuple[ToolInvocation, ...], bool, str]] = []

    def run(
        self, calls: Sequence[ToolInvocation], *, concurrent: bool, task_id: str
    ) -> tuple[ToolOutcome, ...]:
        with self._lock:
            self.batches.append((tuple(calls), concurrent, task_id))
            return tuple(self._answer(call) for call in calls)

    def _answer(self, call: ToolInvocation) -> ToolOutcome:
        index = self._next
        problem = self._mismatch(index, call)
        if problem is not None:
            self.failures.append(problem)
            raise AssertionError(problem)
        step = self._steps[index]
        self._next += 1
        self.calls.append(call)
        log.debug("tool.scripted", call_id=call.call_id, name=call.name, step=index + 1)
        return ToolOutcome(call_id=call.call_id, name=call.name, content=step.content,
                           ok=step.ok, error=None if step.ok else step.content)

    def _mismatch(self, index: int, call: ToolInvocation) -> str | None:
        seen = f"unexpected tool call #{index + 1} {call.name}({call.arguments})"
        if index >= len(self._steps):
            return f"{seen}: all {len(self._steps)} scripted steps are used"
        step = self._steps[index]
        if step.name == call.name and (
            step.arguments is None
            or canonical_arguments(step.arguments) == canonical_arguments(call.arguments)
        ):
            return None
        expected = step.arguments if step.arguments is not None else "<any>"
        return f"{seen}; expected {step.name}({expected})"

    @property
    def remaining(self) -> tuple[ScriptedToolStep, ...]:
        return self._steps[self._next:]

    def assert_complete(self) -> None:
        """Fail if a call was unexpected (even if that error was swallowed) or a step is unused."""
        if self.failures:
            raise AssertionError(self.failures[0])
        left = self.remaining
        if left:
            names = ", ".join(step.name for step in left)
            raise AssertionError(f"{len(left)} scripted tool step(s) not used: {names}")
