"""A named tokenizer read from the embedded model's own GGUF file tokenises as the embedded
llama.cpp server does: the same ids for the same text (``/tokenize``), and, given the chat
template the server runs (mibyan's ChatML with tools), the same prompt ids as the server's
``/apply-template`` + ``/tokenize`` of the very request body. A session recorded with it keeps
the server's reply ids, takes the prompt from the tokenizer, and replays."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from effects.local.llama_server import LocalServer
from effects.local.model_file import TEMPLATE_FILE, default_model
from effects.providers.named_tokenizer import load_tokenizer, prompt_ids, reply_ids
from effects.providers.openai_chat import request_body
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from stages.decision import ModelRequest
from stages.log.events import ModelReplied
from stages.log.messages import Message, ToolCall, canonical_json
from stages.log.tool_specs import ToolSpec

pytestmark = pytest.mark.local_model

TEXTS = ("Hello, world!", "def f(x):\n    return x ** 2  # ünïcödé ✓", "  spaces\t\ttabs\n\nnew",
         "<|im_start|>user\nhi<|im_end|>")
SPEC = ToolSpec(name="get_weather", description="Current weather for a city.",
                parameters=canonical_json({"type": "object", "properties": {
                    "city": {"type": "string", "description": "The city."}},
                    "required": ["city"]}))


@pytest.fixture(autouse=True)
def no_provider(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MIBYAN_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> tuple[str, str]:
    """The embedded server's address, and the GGUF file's tokenizer saved as a folder
    with the template the server runs."""
    home = tmp_path_factory.mktemp("gguf-home")
    server = LocalServer.get(home)
    tokenizer = load_tokenizer(str(default_model()))
    tokenizer.chat_template = TEMPLATE_FILE.read_text(encoding="utf-8")
    folder = home / "tokenizer"
    tokenizer.save_pretrained(folder)
    return f"http://127.0.0.1:{server.port}", str(folder)


def _post(root: str, path: str, body: dict) -> Any:
    answer = httpx2.post(root + path, json=body, timeout=60.0)
    answer.raise_for_status()
    return answer.json()


def test_the_gguf_tokenizer_gives_the_servers_ids_for_any_text(served):
    root, _ = served
    tokenizer = load_tokenizer(str(default_model()))
    for text in TEXTS:
        server = _post(root, "/tokenize", {"content": text, "add_special": False,
                                           "parse_special": True})["tokens"]
        assert tokenizer.encode(text, add_special_tokens=False) == server, text


@pytest.mark.parametrize("tools", [(), (SPEC,)], ids=["no-tools", "tools"])
def test_the_prompt_ids_are_the_servers_for_the_same_request(served, tools):
    root, folder = served
    history = (Message(role="user", content="What is the weather in Paris?"),
               Message(role="assistant", content=None, tool_calls=(
                   ToolCall(id="c1", name="get_weather", arguments='{"city":"Paris"}'),)),
               Message(role="tool", content="Sunny in Paris.", tool_call_id="c1"))
    request = ModelRequest(model="m", provider="local", api_mode="chat_completions",
                           purpose="step", system_prompt="Be terse.", messages=history,
                           tools=tools, stream=False)
    rendered = _post(root, "/apply-template", json.loads(request_body(request)))["prompt"]
    server = _post(root, "/tokenize", {"content": rendered, "add_special": True,
                                       "parse_special": True})["tokens"]
    assert list(prompt_ids(load_tokenizer(folder), request)) == server


def test_a_session_recorded_with_it_keeps_the_servers_reply_ids_and_replays(served, tmp_path):
    root, folder = served
    with Agent(home=tmp_path, max_turns=1, max_tokens=24, record_tokens=True,
               tokenizer=folder) as agent:
        sid = agent.run_conversation("What is the capital of France?")["session_id"]
    events = [from_payload(e.kind, e.schema_version, e.payload)
              for e in read_envelopes(session_path(tmp_path / "sessions", sid))]
    [reply] = [e for e in events if isinstance(e, ModelReplied)]
    tokens = reply.tokens
    assert tokens is not None and tokens.ids and tokens.prompt_source == "tokenizer"
    # The server's ids, which the tokenizer names the same from the pieces (the end-of-turn
    # token's piece is empty: it is left out of that check).
    assert reply_ids(load_tokenizer(folder), tokens.pieces[:-1]) == tokens.ids[:-1]
    prompt = _post(root, "/detokenize", {"tokens": list(tokens.prompt_ids or ())})["content"]
    assert "What is the capital of France?" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert replay(tmp_path / "sessions", sid).identical
