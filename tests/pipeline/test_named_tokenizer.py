"""A tokenizer the user names (``tokenizer=``, ``[tokens] tokenizer``, ``--tokenizer``) with
``record_tokens``: it tokenises the prompt through its chat template, tools included, in place
of the server, and names the ids of reply pieces the provider sent without ids. Against the
loopback fakes (Responses, llama.cpp's chat, Anthropic), with a tiny character-level tokenizer
built here and saved as a Hugging Face folder."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from effects.providers.named_tokenizer import load_tokenizer, reply_ids
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.tools import tool
from stages.errors import UsageError
from stages.log.events import ContextNotice, ModelReplied
from tests.fake_anthropic import FakeAnthropicServer, Reply
from tests.fake_llamacpp import FakeLlamaServer, Written, tokenize
from tests.fake_responses import FakeResponsesServer, ResponsesReply

ANSWER = "It is sunny in Paris."
QUESTION = "What is the weather in Paris?"
OPENAI_KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
CHATML = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
    "{%- for c in m.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>"
    "{%- endfor %}<|im_end|>\n{% endfor %}"
    "{%- if tools %}<|im_start|>tools\n{{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    """One token per character (printable ASCII), ChatML's two specials, saved as a folder."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<|im_start|>": 1, "<|im_end|>": 2}
    vocab.update({c: i + 3 for i, c in enumerate(string.printable)})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    folder = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>",
                            chat_template=CHATML).save_pretrained(folder)
    return str(folder)


def _replies(home: Path, sid: str) -> list[ModelReplied]:
    return [e for e in _events(home, sid) if isinstance(e, ModelReplied)]


def _events(home: Path, sid: str) -> list:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", sid))]


def _responses_session(home: Path, tokenizer: str, *replies: str,
                       piece_size: int = 1) -> str:
    with FakeResponsesServer(piece_size=piece_size) as server:
        server.script(*(ResponsesReply.text(r) for r in replies))
        with Agent(model="gpt-fake", base_url=server.base_url, api_key="sk-test",
                   provider="openai", api_mode="codex_responses", home=home,
                   tools=[get_weather], record_tokens=True, tokenizer=tokenizer) as agent:
            result = agent.run_conversation(QUESTION)
    assert result["completed"], result
    return result["session_id"]


def test_the_prompt_is_the_templates_and_the_pieces_ids_are_named(tmp_path, tokenizer_dir):
    sid = _responses_session(tmp_path, tokenizer_dir, ANSWER)
    [reply] = _replies(tmp_path, sid)
    tokens = reply.tokens
    assert tokens is not None and tokens.prompt_source == "tokenizer"
    tokenizer = load_tokenizer(tokenizer_dir)
    assert tokens.ids == tuple(tokenizer.convert_tokens_to_ids(list(ANSWER)))
    assert len(tokens.logprobs) == len(ANSWER)
    prompt = tokenizer.decode(list(tokens.prompt_ids or ()))
    assert prompt.startswith("<|im_start|>system\n")
    assert f"<|im_start|>user\n{QUESTION}<|im_end|>\n" in prompt
    tools = prompt.split("<|im_start|>tools\n")[1].split("<|im_end|>")[0]
    assert [t["function"]["name"] for t in json.loads(tools)] == ["get_weather"]
    assert prompt.endswith("<|im_start|>assistant\n")
    # Recorded with the reply: replay serves it from the log, with no tokenizer.
    assert replay(tmp_path / "sessions", sid).identical


def test_pieces_that_are_not_one_token_each_leave_the_ids_unnamed(tmp_path, tokenizer_dir):
    sid = _responses_session(tmp_path, tokenizer_dir, ANSWER, piece_size=3)
    [reply] = _replies(tmp_path, sid)
    assert reply.tokens is not None and reply.tokens.ids is None
    assert reply.tokens.prompt_ids and len(reply.tokens.pieces) == 7
    assert reply_ids(load_tokenizer(tokenizer_dir), ("It", " i")) is None
    assert reply_ids(load_tokenizer(tokenizer_dir), ()) is None


def test_ids_of_a_reply_whose_text_was_masked_are_withheld(tmp_path, tokenizer_dir):
    sid = _responses_session(tmp_path, tokenizer_dir, f"The key is {OPENAI_KEY}.")
    [reply] = _replies(tmp_path, sid)
    assert reply.tokens is not None and reply.tokens.withheld == "redacted"
    assert reply.tokens.ids is None and reply.tokens.pieces == ()
    assert reply.tokens.prompt_ids  # the prompt held no secret
    log = session_path(tmp_path / "sessions", sid).read_bytes()
    assert OPENAI_KEY.encode() not in log


def test_the_server_is_not_asked_and_its_own_ids_stay(tmp_path, tokenizer_dir):
    with FakeLlamaServer() as server:
        server.script(Written(ANSWER))
        with Agent(model="fake", base_url=server.base_url, api_key="sk-test", provider="llama",
                   home=tmp_path, record_tokens=True, tokenizer=tokenizer_dir,
                   stream=False) as agent:
            sid = agent.run_conversation(QUESTION)["session_id"]
    assert server.side_calls == []
    [reply] = _replies(tmp_path, sid)
    assert reply.tokens is not None and reply.tokens.prompt_source == "tokenizer"
    assert reply.tokens.ids == (*tokenize(ANSWER, parse_special=False), 2)  # the server's


def test_an_anthropic_session_is_told_once_and_still_records_the_prompt(tmp_path,
                                                                        tokenizer_dir):
    with FakeAnthropicServer() as server:
        server.script(Reply.text(ANSWER), Reply.text("Still sunny."))
        with Agent(model="claude-fake", base_url=server.base_url, api_key="sk-ant-test",
                   provider="anthropic", api_mode="anthropic_messages", home=tmp_path,
                   record_tokens=True, tokenizer=tokenizer_dir) as agent:
            first = agent.run_conversation(QUESTION)
            second = agent.run_conversation("And tomorrow?")
    [note] = first["warnings"]
    assert "returns no logprobs" in note and tokenizer_dir in note
    assert second["warnings"] == []
    sid = first["session_id"]
    notices = [e for e in _events(tmp_path, sid) if isinstance(e, ContextNotice)]
    assert [n.source for n in notices] == ["tokens"]
    replies = _replies(tmp_path, sid)
    assert all(r.tokens is not None and r.tokens.ids is None and r.tokens.prompt_ids
               for r in replies)
    assert replay(tmp_path / "sessions", sid).identical


def test_a_tokenizer_that_loads_nothing_is_a_usage_error_before_the_session(tmp_path):
    missing = str(tmp_path / "no-such-model.gguf")
    with pytest.raises(UsageError, match=r"no-such-model\.gguf"):
        Agent(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", home=tmp_path,
              record_tokens=True, tokenizer=missing)
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").iterdir())
