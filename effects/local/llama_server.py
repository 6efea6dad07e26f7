"""The embedded local model: llama.cpp's own HTTP server, run by ``xllamacpp`` in a child process.

``LocalServer.get(home)`` runs the model chosen by ``[local]`` in ``home/config.toml`` (see
``effects.local.model_file``) on a free loopback port, logging to ``home/logs/llama-server.log``.
A process keeps one server per distinct ``[local]`` configuration: homes (and agents) that ask
for the same one share it, whichever home started it and holds its log; a different one gets its
own child, never the other's killed. One died is restarted by the next ``get``; one no home asks
for any more (its home's settings changed) is stopped. It serves ``/v1/chat/completions``,
``/v1/responses`` and ``/v1/messages``. Needs the ``mibyan[local]`` extra.

Why a child and not the server in this process: a crash inside llama.cpp (an abort, a CPU
instruction this machine lacks) kills only the child, which the next ``get`` replaces, and a
session goes on. The child runs this module as ``__main__`` and exits when its parent's pipe
closes, however the parent died.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, ClassVar

import httpx2

from effects.local.model_file import INSTALL_HINT, LocalSettings, local_settings, model_file
from effects.logs import get_logger
from stages.errors import ProviderUnavailableError, UsageError

__all__ = ["LocalServer"]

START_TIMEOUT = 120.0
CONFIG_ENV = "MIBYAN_LOCAL_SERVER_CONFIG"
LOG_ROTATE_BYTES = 5_000_000
PENALTY_LAST_N = 256
START_MARK = "mibyan starts the llama server"
LOG_TAIL_BYTES = 64_000  # a native backtrace is about 12 KB; the error is above it
# A failed GGML_ASSERT runs gdb, which prints a backtrace of about 100 lines after the error.
_BACKTRACE_START = re.compile(r"\[New LWP |\[Thread debugging |#0 ")
_BACKTRACE_END = re.compile(r"\[Inferior \d+ \(process \d+\) detached\]")

_log = get_logger(__name__)


def _check_installed() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        raise UsageError(f"the local model needs xllamacpp (llama.cpp's server); {INSTALL_HINT}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalServer:
    """A llama.cpp server child, one per distinct configuration in a process. Use :meth:`get`,
    not the constructor."""

    _lock = threading.Lock()
    # Keyed by the settings a child is started with: every home (and agent) wanting the same
    # configuration shares its child, and one wanting another does not stop it (issue 30: two
    # homes in one process restarted a single shared child for each other at every call).
    _servers: ClassVar[dict[LocalSettings, LocalServer]] = {}
    _home_wants: ClassVar[dict[Path, LocalSettings]] = {}  # what each home asked for last
    _atexit_done = False

    def __init__(self, home: Path, settings: LocalSettings | None = None, *,
                 api_key: str | None = None) -> None:
        """``api_key``: requests must carry it (the embedded model needs none; a test of the
        error path uses one)."""
        self.home = Path(home)
        self.settings = settings if settings is not None else local_settings(self.home)
        self.api_key = api_key
        self.model_name = self.settings.model_name
        self.log_path = self.home / "logs" / "llama-server.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def get(cls, home: Path, settings: LocalSettings | None = None) -> LocalServer:
        """The running server for these settings; started if there is none or it died.
        ``settings`` default to the ``[local]`` table of ``home/config.toml``. A server that
        ``home`` asked for before and that no home wants any more is stopped: a process keeps
        a child per configuration in use only."""
        home = Path(home)
        settings = settings if settings is not None else local_settings(home)
        with cls._lock:
            before = cls._home_wants.get(home)
            cls._home_wants[home] = settings
            if before is not None and before != settings \
                    and before not in cls._home_wants.values():
                old = cls._servers.pop(before, None)
                if old is not None:
                    _log.info("local_server.unused", pid=old.pid, model=old.model_name)
                    old.stop()
            cur = cls._servers.get(settings)
            if cur is not None and cur.alive():
                return cur
            if cur is not None:
                _log.warning("local_server.restart", was_alive=False, pid=cur.pid)
                cur.stop()
                del cls._servers[settings]
            server = cls(home, settings)
            server._start()
            cls._servers[settings] = server
            if not cls._atexit_done:
                atexit.register(cls.stop_all)
                cls._atexit_done = True
            return server

    @classmethod
    def stop_all(cls) -> None:
        with cls._lock:
            servers = list(cls._servers.values())
            cls._servers.clear()
            cls._home_wants.clear()
            for server in servers:
                server.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdin:
            proc.stdin.close()

    def _child_config(self) -> dict[str, Any]:
        s = self.settings
        return {"model_path": str(model_file(s)), "alias": self.model_name, "port": self.port,
                "n_ctx": s.n_ctx, "threads": s.threads, "temperature": s.temperature,
                "repeat_penalty": s.repeat_penalty,
                "chat_template": s.template_text(), "api_key": self.api_key,
                "grammar": s.grammar}

    def _command(self, config: dict[str, Any]) -> list[str]:
        del config  # passed in the environment: an API key must not show in the process list
        return [sys.executable, "-m", "effects.local.llama_server"]

    def _start(self) -> None:
        _check_installed()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > LOG_ROTATE_BYTES:
            self.log_path.replace(self.log_path.with_suffix(".log.1"))
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        for attempt in range(3):  # the port may be taken between probing and binding
            self.port, started = _free_port(), time.perf_counter()
            config = self._child_config()
            env[CONFIG_ENV] = json.dumps(config)
            command = self._command(config)
            with self.log_path.open("ab") as log:
                log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} {START_MARK} on port "
                          f"{self.port} ({self.model_name})\n".encode())
                log.flush()
                self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log,
                                              stderr=subprocess.STDOUT, env=env)
            try:
                self._wait_ready()
            except ProviderUnavailableError:
                self.stop()
                if "address already in use" in self._log_tail(5).lower() and attempt < 2:
                    continue
                raise
            _log.info("local_server.ready", port=self.port, pid=self.pid,
                      model=self.model_name, seconds=round(time.perf_counter() - started, 2))
            return

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        with httpx2.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=5.0,
                           headers=auth) as client:
            while time.monotonic() < deadline:
                if self._proc is None or self._proc.poll() is not None:
                    raise self._failure("exited")
                try:
                    if client.get("/health").status_code == 200:
                        # One token now: a build this CPU cannot run fails here, clearly.
                        client.post("/completion", json={"prompt": "Hi", "n_predict": 1},
                                    timeout=60.0).raise_for_status()
                        return
                except httpx2.HTTPStatusError as exc:
                    raise self._failure(f"failed its warm-up: {exc.response.text[:300]}") from exc
                except httpx2.TransportError:
                    pass
                time.sleep(0.1)
        raise self._failure(f"was not ready after {START_TIMEOUT:.0f}s")

    def _failure(self, what: str) -> ProviderUnavailableError:
        time.sleep(0.2)  # let the child's last words reach the log
        code = self._proc.poll() if self._proc else None
        if code is not None:
            what = f"{what} with code {code}"
        if code == -signal.SIGILL:
            what += "\nthis llama.cpp build uses CPU instructions this machine cannot run"
        return ProviderUnavailableError(f"the local llama server ({self.model_name}) {what}\n"
                                        f"last lines of {self.log_path}:\n{self._log_tail()}",
                                        provider="local")

    def _log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` of this start's log, without a debugger's backtrace."""
        try:
            data = self.log_path.read_bytes()[-LOG_TAIL_BYTES:].decode("utf-8", "replace")
        except OSError:
            return ""
        this_start = data.rpartition(START_MARK)[2]
        return "\n".join(_without_backtrace(this_start.splitlines())[-lines:])


def _without_backtrace(lines: list[str]) -> list[str]:
    """The lines with each debugger backtrace replaced by a note: it hid the error above it."""
    kept: list[str] = []
    dropped = 0
    for line in lines:
        if dropped or _BACKTRACE_START.match(line):
            dropped += 1
            if _BACKTRACE_END.match(line):
                kept.append(f"(a native backtrace of {dropped} lines, left in the log)")
                dropped = 0
        else:
            kept.append(line)
    if dropped:
        kept.append(f"(a native backtrace of {dropped} lines, left in the log)")
    return kept


# ---- the child process ------------------------------------------------------------------------


def _params(config: dict[str, Any]) -> Any:
    import xllamacpp

    params = xllamacpp.CommonParams()
    # Always a file: given a Hugging Face repo, the embedded server aborts instead of fetching.
    params.model.path = config["model_path"]
    params.model_alias = {config["alias"]}
    params.hostname = "127.0.0.1"
    params.port = config["port"]
    params.n_ctx = config["n_ctx"]
    params.n_parallel = 1  # one slot: the whole window for one conversation
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = config["threads"]
    params.sampling.temp = config["temperature"]
    params.sampling.penalty_repeat = config["repeat_penalty"]
    # llama.cpp's 64 tokens are shorter than the block a small model repeats (a JSON object, a
    # list item): over 256 SmolLM2 ends the main job's answer instead of looping to the cap.
    params.sampling.penalty_last_n = PENALTY_LAST_N
    params.use_jinja = True  # the model's (or our) chat template, with tools
    if config["api_key"]:
        params.api_keys = [config["api_key"]]
    if config["chat_template"] is not None:
        params.chat_template = config["chat_template"]
    if config.get("grammar"):
        params.sampling.grammar = config["grammar"]
    return params


def _child_main() -> None:
    import xllamacpp

    def watch_parent() -> None:  # the parent holds our stdin open: EOF means it is gone
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    try:
        config = json.loads(os.environ.pop(CONFIG_ENV))
        server = xllamacpp.Server(_params(config))  # serves until the process ends
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)  # not sys.exit: the thread blocked on stdin would hang the shutdown
    # llama.cpp's server takes SIGTERM for itself and does not exit in-process: end at once.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"mibyan: llama.cpp server listening on {server.listening_address}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    _child_main()
