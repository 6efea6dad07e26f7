"""The token entries of each server's logprobs, and the prompt asked of each server's
tokeniser (through the post function the adapter gives it)."""

from __future__ import annotations

import json

from effects.providers.token_wire import TokenCollector, logprob_fields, prompt_tokens
from stages.decision import ModelRequest
from stages.errors import ProviderHTTPError

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "tools": [{"type": "function"}], "stream": True}).encode()


def _request(provider: str, logprobs: bool = True) -> ModelRequest:
    return ModelRequest(model="m", provider=provider, api_mode="chat_completions",
                        purpose="step", system_prompt=None, messages=(), logprobs=logprobs)


def _feed(*entries: dict) -> TokenCollector:
    collector = TokenCollector()
    collector.feed({"logprobs": {"content": list(entries)}})
    return collector


def test_each_servers_entries_give_ids_where_the_server_names_them():
    llama = _feed({"id": 504, "token": "The", "logprob": -2.5},
                  {"id": 2, "token": "", "bytes": [], "logprob": -0.01}).record((None, None))
    assert (llama.ids, llama.pieces, llama.logprobs) == ((504, 2), ("The", ""), (-2.5, -0.01))
    vllm = _feed({"token": "token_id:9906", "bytes": [72, 195, 169], "logprob": -0.1}).record(
        ((1, 2), "vllm"))
    assert (vllm.ids, vllm.pieces, vllm.prompt_ids) == ((9906,), ("Hé",), (1, 2))
    openai = _feed({"token": "Hi", "bytes": [72, 105], "logprob": -0.3}).record((None, None))
    assert openai.ids is None and openai.pieces == ("Hi",)
    assert TokenCollector().record((None, None)).ids is None  # no logprobs came


def test_only_a_recording_request_asks_and_only_vllm_is_asked_for_ids():
    assert logprob_fields(_request("openai", logprobs=False)) == {}
    assert logprob_fields(_request("openai")) == {"logprobs": True}
    assert logprob_fields(_request("vllm")) == {"logprobs": True,
                                                "return_tokens_as_token_ids": True}


def _refused(path: str) -> ProviderHTTPError:
    return ProviderHTTPError(f"404 on {path}", status=404, provider="p")


def test_llama_cpp_renders_the_very_body_then_tokenises_it():
    asked: list[tuple[str, dict]] = []

    def post(path: str, body: bytes) -> object:
        asked.append((path, json.loads(body)))
        return {"prompt": "<s>hi"} if path == "/apply-template" else {
            "tokens": [{"id": 1, "piece": "<s>"}, 7]}
    assert prompt_tokens(post, BODY, _request("local")) == ((1, 7), "llama.cpp")
    assert asked[0] == ("/apply-template", {"model": "m", "messages": [
        {"role": "user", "content": "hi"}], "tools": [{"type": "function"}]})
    assert asked[1] == ("/tokenize", {"content": "<s>hi", "add_special": True,
                                      "parse_special": True})


def test_vllm_tokenises_the_messages_and_a_server_with_neither_leaves_none():
    def vllm(path: str, body: bytes) -> object:
        if path == "/apply-template":
            raise _refused(path)
        assert json.loads(body) == {"model": "m", "messages": [
            {"role": "user", "content": "hi"}], "add_generation_prompt": True,
            "tools": [{"type": "function"}]}
        return {"tokens": [5, 6], "count": 2}
    assert prompt_tokens(vllm, BODY, _request("vllm")) == ((5, 6), "vllm")

    def neither(path: str, body: bytes) -> object:
        raise _refused(path)
    assert prompt_tokens(neither, BODY, _request("openai")) == (None, None)
