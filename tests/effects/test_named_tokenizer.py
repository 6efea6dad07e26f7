"""What a named tokenizer records of a call (``effects.providers.named_tokenizer``), with a
tokenizer of the shape transformers' have (``apply_chat_template``, ``encode``) written here:
one token per character, a Jinja ChatML template. The real transformers tokenizers are the
slow lane's (tests/pipeline/test_named_tokenizer.py, test_gguf_tokenizer.py)."""

from __future__ import annotations

import json

import jinja2
import pytest

from effects.providers.named_tokenizer import prompt_ids, reply_ids, with_named_tokens
from stages.decision import ModelRequest
from stages.log.events import ModelReplied, Usage
from stages.log.messages import Message, ToolCall
from stages.log.tokens import ReplyTokens
from stages.log.tool_specs import ToolSpec

TEMPLATE = (
    "{%- for m in messages %}<{{ m.role }}>{{ m.content or '' }}"
    "{%- for c in m.tool_calls or [] %}[{{ c.function.name }} {{ c.function.arguments.city }}]"
    "{%- endfor %}</>{% endfor %}{% if tools %}<tools>{{ tools | length }}</>{% endif %}"
    "{%- if add_generation_prompt %}<assistant>{% endif %}")


class CharTokenizer:
    """One id per character (its code point); the template's output tokenised the same way."""

    def __init__(self, template: str = TEMPLATE) -> None:
        self.template = jinja2.Environment().from_string(template)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        del add_special_tokens
        return [ord(c) for c in text]

    def apply_chat_template(self, messages: list, *, tools: list | None, tokenize: bool,
                            add_generation_prompt: bool) -> dict:
        assert tokenize
        text = self.template.render(messages=messages, tools=tools,
                                    add_generation_prompt=add_generation_prompt)
        return {"input_ids": self.encode(text)}  # as transformers 5 answers


def _text(ids: tuple[int, ...] | None) -> str:
    return "".join(map(chr, ids or ()))


SPEC = ToolSpec(name="get_weather", description="Weather.", parameters='{"type":"object"}')
HISTORY = (Message(role="user", content="Weather?"),
           Message(role="assistant", content=None, tool_calls=(
               ToolCall(id="c1", name="get_weather", arguments='{"city":"Paris"}'),)),
           Message(role="tool", content="Sunny.", tool_call_id="c1"))
REQUEST = ModelRequest(model="m", provider="openai", api_mode="codex_responses",
                       purpose="step", system_prompt="Be brief.", messages=HISTORY,
                       tools=(SPEC,), logprobs=True, tokenizer="chars")


def _reply(tokens: ReplyTokens | None, content: str = "Sunny.") -> ModelReplied:
    return ModelReplied(message=Message(role="assistant", content=content),
                        finish_reason="stop", usage=Usage(), model="m", latency_ms=1.0,
                        tokens=tokens)


def test_the_prompt_is_the_system_prompt_history_and_tools_through_the_template():
    prompt = _text(prompt_ids(CharTokenizer(), REQUEST))
    # Arguments reach the template as objects (the convention of Hugging Face templates).
    assert prompt == ("<system>Be brief.</><user>Weather?</><assistant>[get_weather Paris]</>"
                      "<tool>Sunny.</><tools>1</><assistant>")


def test_the_reply_gets_the_prompt_and_the_ids_of_its_pieces():
    pieces = ("Sun", "ny.")
    tokens = ReplyTokens(pieces=pieces, logprobs=(-0.1, -0.2))
    out = with_named_tokens(_reply(tokens), REQUEST, _OneTokenPerPiece(pieces)).tokens
    assert out is not None and out.ids == (0, 1) and out.prompt_source == "tokenizer"
    assert out.pieces == pieces and out.logprobs == (-0.1, -0.2)
    assert _text(out.prompt_ids).endswith("<assistant>")


def test_ids_the_provider_named_stay_and_pieces_of_another_split_name_none():
    named = ReplyTokens(pieces=("Sun",), logprobs=(-0.1,), ids=(77,))
    out = with_named_tokens(_reply(named), REQUEST, CharTokenizer()).tokens
    assert out is not None and out.ids == (77,)
    assert reply_ids(CharTokenizer(), ("Sun", "ny.")) is None  # three characters a piece
    assert reply_ids(CharTokenizer(), ("S", "u")) == (ord("S"), ord("u"))


def test_a_reply_without_tokens_gets_the_prompt_only():
    out = with_named_tokens(_reply(None), REQUEST, CharTokenizer()).tokens
    assert out is not None and out.ids is None and out.pieces == () and out.prompt_ids


def test_a_template_that_fails_leaves_the_prompt_unrecorded_and_the_reply_standing():
    broken = CharTokenizer("{{ raise_exception('no tools here') }}")
    tokens = ReplyTokens(pieces=("S",), logprobs=(-0.1,))
    reply = with_named_tokens(_reply(tokens), REQUEST, broken)
    assert reply.tokens is not None
    assert reply.tokens.prompt_ids is None and reply.tokens.prompt_source is None
    assert reply.tokens.ids == (ord("S"),) and reply.message.content == "Sunny."


class _OneTokenPerPiece(CharTokenizer):
    """A vocabulary of exactly the given pieces (ids in order), characters otherwise."""

    def __init__(self, pieces: tuple[str, ...]) -> None:
        super().__init__()
        self.ids = {p: i for i, p in enumerate(pieces)}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [self.ids[text]] if text in self.ids else super().encode(text)


@pytest.mark.parametrize("arguments", ["", "{}"])
def test_a_call_without_arguments_reaches_the_template_as_an_empty_object(arguments):
    call = Message(role="assistant", content=None,
                   tool_calls=(ToolCall(id="c", name="now", arguments=arguments),))
    template = "{% for m in messages %}{{ m.tool_calls[0].function.arguments | tojson }}" \
               "{% endfor %}"
    request = ModelRequest(model="m", provider="p", api_mode="chat_completions",
                           purpose="step", system_prompt=None, messages=(call,))
    assert json.loads(_text(prompt_ids(CharTokenizer(template), request))) == {}
