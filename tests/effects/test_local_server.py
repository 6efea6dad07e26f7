"""The embedded llama.cpp server, against the real model (needs the ``mibyan[local]`` extra)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from effects import local_server
from effects.local_server import MODEL_FILE, MODEL_SHA256, LocalServer, ensure_model
from stages.errors import EffectError, ProviderUnavailableError, UsageError

pytestmark = pytest.mark.local_model

if importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"):
    pytest.skip("the [local] extra is not installed", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}
ASK = [{"role": "system", "content": "You are a terse assistant."},
       {"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mibyan-home")


@pytest.fixture(scope="module")
def client(home: Path):
    server = LocalServer.get(home)
    with httpx.Client(base_url=server.base_url, timeout=120.0) as http:
        yield http
    server.stop()


def chat(client: httpx.Client, **body) -> httpx.Response:
    return client.post("/chat/completions",
                       json={"model": local_server.MODEL_NAME, "temperature": 0, **body})


def sse_events(response: httpx.Response) -> list:
    lines = [ln[len("data: "):] for ln in response.text.splitlines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(ln) for ln in lines[:-1]]


def test_model_is_assembled_once_and_verified(home: Path):
    path = ensure_model(home)
    assert path == home / "models" / MODEL_FILE
    with path.open("rb") as fh:
        assert hashlib.file_digest(fh, "sha256").hexdigest() == MODEL_SHA256
    mtime = path.stat().st_mtime_ns
    assert ensure_model(home) == path and path.stat().st_mtime_ns == mtime
    assert [p.name for p in path.parent.iterdir()] == [MODEL_FILE]  # no partial file left


def test_a_corrupted_model_is_detected(home: Path, tmp_path: Path):
    bad = tmp_path / "models" / MODEL_FILE
    bad.parent.mkdir()
    shutil.copyfile(ensure_model(home), bad)
    with bad.open("r+b") as fh:
        fh.seek(1_000_000)
        byte = fh.read(1)
        fh.seek(1_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EffectError, match="corrupt.*delete it"):
        ensure_model(tmp_path)


def test_a_missing_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == local_server.MODEL_PACKAGE
                        else real(name, *a))
    with pytest.raises(UsageError, match=r"mibyan\[local\]"):
        ensure_model(tmp_path)


def test_a_server_that_fails_to_start_reports_its_log(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(local_server, "ensure_model", lambda home: Path("/nonexistent"))
    monkeypatch.setattr(LocalServer, "_command", lambda self, model: [
        sys.executable, "-c", "import sys; print('boom: no model'); sys.exit(3)"])
    with pytest.raises(ProviderUnavailableError, match=r"(?s)exited with code 3.*boom: no model"):
        LocalServer(tmp_path)._start()
    assert (tmp_path / "logs" / "llama-server.log").exists()


def test_gemma_turns_keep_system_tool_calls_and_results():
    prompt = local_server._gemma_turns([
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21 C"},
    ], None, None)
    assert prompt == (
        "<start_of_turn>user\nYou are a terse assistant.\n\nWhat is the weather in Paris?"
        "<end_of_turn>\n<start_of_turn>model\n"
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}<end_of_turn>\n'
        "<start_of_turn>user\nTool result (c1):\nsunny, 21 C<end_of_turn>\n"
        "<start_of_turn>model\n")


def test_server_answers_a_chat_completion(client: httpx.Client):
    reply = chat(client, messages=ASK, max_tokens=12)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert isinstance(body["choices"][0]["message"]["content"], str)
    assert body["choices"][0]["finish_reason"] in ("stop", "length")
    assert 0 < body["usage"]["completion_tokens"] <= 12
    assert body["usage"]["prompt_tokens"] > 10
    assert client.get("/models").json()["data"][0]["id"] == local_server.MODEL_NAME


def test_streaming_ends_with_usage(client: httpx.Client):
    plain = chat(client, messages=ASK, max_tokens=12).json()
    reply = chat(client, messages=ASK, max_tokens=12, stream=True,
                 stream_options={"include_usage": True})
    assert reply.status_code == 200 and reply.headers["content-type"].startswith(
        "text/event-stream")
    events = sse_events(reply)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in events[:-1])
    assert text == plain["choices"][0]["message"]["content"]
    assert events[-1]["choices"] == []
    usage = events[-1]["usage"]
    assert usage["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    assert abs(usage["completion_tokens"] - plain["usage"]["completion_tokens"]) <= 1
    unasked = sse_events(chat(client, messages=ASK, max_tokens=2, stream=True))
    assert all(event["choices"] and "usage" not in event for event in unasked)


def test_a_named_tool_choice_forces_a_parseable_call_whose_result_reaches_the_model(
        client: httpx.Client):
    reply = chat(client, messages=ASK, tools=[WEATHER], tool_choice=FORCE_WEATHER, max_tokens=48)
    assert reply.status_code == 200, reply.text
    message = reply.json()["choices"][0]["message"]
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"])["city"], str)

    def follow_up(result: str) -> dict:
        messages = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": call["id"], "content": result}]
        answer = chat(client, messages=messages, tools=[WEATHER], max_tokens=8)
        assert answer.status_code == 200, answer.text
        return answer.json()

    short, long = follow_up("sunny"), follow_up("sunny " * 50)
    assert isinstance(short["choices"][0]["message"]["content"], str)
    assert long["usage"]["prompt_tokens"] >= short["usage"]["prompt_tokens"] + 49


def test_streamed_forced_tool_call(client: httpx.Client):
    reply = chat(client, messages=ASK, tools=[WEATHER], tool_choice=FORCE_WEATHER, max_tokens=48,
                 stream=True, stream_options={"include_usage": True})
    events = sse_events(reply)
    deltas = [d for e in events for c in e["choices"] for d in c["delta"].get("tool_calls") or []]
    assert deltas[0]["function"]["name"] == "get_weather"
    args = "".join(d["function"].get("arguments") or "" for d in deltas)
    assert isinstance(json.loads(args)["city"], str)
    assert events[-1]["usage"]["completion_tokens"] > 0


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_over_the_context_window_is_a_400(client: httpx.Client, stream: bool):
    huge = [{"role": "user", "content": "word " * (local_server.DEFAULT_N_CTX + 100)}]
    reply = chat(client, messages=huge, max_tokens=8, stream=stream)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(
        f"This model's maximum context length is {local_server.DEFAULT_N_CTX} tokens.")


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
        from effects.local_server import LocalServer
        print("PID", LocalServer.get(Path({str(home)!r})).pid, flush=True)
        if {ending == "sigkill"!r}:
            time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                  "HOST": "192.0.2.1", "PORT": "1"})
    pid = int(next(line for line in parent.stdout if line.startswith("PID ")).split()[1])
    if ending == "sigkill":
        parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    parent.stdout.close()
    assert _child_pid_gone(pid)


def test_a_killed_server_is_restarted_by_get(client: httpx.Client, home: Path):
    first = LocalServer.get(home)
    os.kill(first.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while first.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not first.alive()
    with pytest.raises(httpx.TransportError):
        client.get("/models")
    second = LocalServer.get(home)
    assert second is not first and second.alive()
    reply = httpx.post(f"{second.base_url}/chat/completions",
                       json={"messages": ASK, "max_tokens": 4}, timeout=60.0)
    assert reply.status_code == 200
    second.stop()
