"""OpenAI's wire shapes: the request checked, the answer and its chunks built."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from effects.providers.openai_chat import usage_from
from pipeline.serve import openai_compat as oa
from stages.log.events import Usage


def test_system_and_developer_messages_become_the_system_text():
    chat = oa.parse_chat_request({"model": "m", "messages": [
        {"role": "system", "content": "one"}, {"role": "user", "content": "q"},
        {"role": "developer", "content": "two"}, {"role": "assistant", "content": "a"},
        {"role": "user", "content": "last"}]}, ("m",))
    assert chat.system_message == "one\n\ntwo" and chat.user_message == "last"
    assert chat.history == ({"role": "user", "content": "q"},
                            {"role": "assistant", "content": "a"})
    assert (chat.stream, chat.include_usage) == (False, False)


def test_an_assistant_tool_call_and_its_result_are_history():
    chat = oa.parse_chat_request({"model": "m", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "user", "content": "and?"}]}, ("m",))
    assert chat.history is not None
    assert [m["role"] for m in chat.history] == ["user", "assistant", "tool"]
    assert chat.history[1]["tool_calls"][0]["function"]["name"] == "f"


CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _refused(*messages) -> oa.ApiError:
    with pytest.raises(oa.ApiError) as caught:
        oa.parse_chat_request({"model": "m", "messages": [*messages, {"role": "user",
                                                                       "content": "x"}]},
                              ("m",))
    assert caught.value.status == 400
    return caught.value


@pytest.mark.parametrize(("message", "param", "said"), [
    ({"role": "assistant", "tool_calls": "bad"}, "messages[0].tool_calls",
     "Invalid type for 'messages[0].tool_calls': expected an array of tool calls."),
    ({"role": "assistant", "tool_calls": ["bad"]}, "messages[0].tool_calls[0]",
     "Invalid type for 'messages[0].tool_calls[0]': expected an object."),
    ({"role": "assistant", "tool_calls": [{"id": "c1"}]}, "messages[0].tool_calls[0].function",
     "Missing required parameter: 'messages[0].tool_calls[0].function'."),
    ({"role": "assistant", "tool_calls": [{**CALL, "id": 7}]}, "messages[0].tool_calls[0].id",
     "Invalid type for 'messages[0].tool_calls[0].id': expected a string, got int."),
    ({"role": "assistant", "tool_calls": [{**CALL, "type": "custom"}]},
     "messages[0].tool_calls[0].type",
     "Invalid value for 'messages[0].tool_calls[0].type': 'custom'; expected 'function'."),
    ({"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f",
                                                                "arguments": {"a": 1}}}]},
     "messages[0].tool_calls[0].function.arguments",
     "Invalid type for 'messages[0].tool_calls[0].function.arguments': expected a string, got "
     "dict."),
    ({"role": "user", "content": "q", "tool_calls": [CALL]}, "messages[0].tool_calls",
     "Invalid parameter: 'messages[0].tool_calls' is only allowed on messages with role "
     "'assistant'."),
    ({"role": "user", "content": "q", "name": ["me"]}, "messages[0].name",
     "Invalid type for 'messages[0].name': expected a string, got list."),
    ({"role": "assistant", "content": "a", "reasoning_parts": [{"type": "?"}]},
     "messages[0].reasoning_parts",
     "Invalid value for 'messages[0].reasoning_parts': expected the reasoning parts of a "
     "message as a session's messages give them."),
])
def test_a_malformed_message_is_a_400_naming_its_field(message, param, said):
    """Said in OpenAI's words, never in Python's ("string indices must be integers")."""
    refused = _refused(message)
    assert (refused.param, refused.message) == (param, said)


def test_a_tool_call_without_its_result_is_refused_as_openai_refuses_it():
    """Forwarded, the provider would refuse it and the turn fail as a 502."""
    refused = _refused({"role": "user", "content": "q"},
                       {"role": "assistant", "content": None,
                        "tool_calls": [CALL, {**CALL, "id": "c2"}]},
                       {"role": "tool", "tool_call_id": "c2", "content": "r"})
    assert refused.param == "messages[1].tool_calls"
    assert refused.message == (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids of 'messages[1]' did not have "
        "response messages: c1.")


@pytest.mark.parametrize("earlier", [
    [{"role": "assistant", "content": "a"}],
    [{"role": "assistant", "content": None, "tool_calls": [CALL]},
     {"role": "tool", "tool_call_id": "c1", "content": "r"}],  # answered twice
    [{"role": "assistant", "content": None, "tool_calls": [CALL]},
     {"role": "system", "content": "s"}],  # something between the call and its result
])
def test_a_tool_message_must_answer_the_assistant_message_before_it(earlier):
    tool = {"role": "tool", "tool_call_id": "c1", "content": "r"}
    refused = _refused({"role": "user", "content": "q"}, *earlier, tool)
    if earlier[-1]["role"] == "system":
        assert refused.param == "messages[1].tool_calls"
    else:
        assert refused.param == f"messages[{len(earlier) + 1}].role"
        assert refused.message.startswith("Invalid parameter: messages with role 'tool' must "
                                          "be a response to a preceding message with "
                                          "'tool_calls'")


@attrs.frozen
class Result:
    turn_exit_reason: str
    final_response: str | None = "x"
    usage: Usage = Usage(input_tokens=7, output_tokens=3, cache_read_tokens=2,
                         reasoning_tokens=1)
    tool_calls: tuple = ()  # the calls to a client's tools (rules 8): none here


@pytest.mark.parametrize(("reason", "finish"), [
    ("text_response(finish_reason=stop)", "stop"), ("interrupted_during_api_call", "stop"),
    ("client_tool_calls", "tool_calls"),
    ("max_iterations_reached(5/5)", "length"), ("incomplete_response", "length"),
    ("content_filter", "content_filter")])
def test_finish_reasons(reason, finish):
    assert oa.finish_reason(Result(reason)) == finish


def test_the_completion_and_the_usage_chunk():
    """OpenAI counts cached tokens inside prompt_tokens (mibyan's input_tokens leaves them
    out): the inverse of ``effects.providers.openai_chat.usage_from``."""
    body = oa.completion_body("chatcmpl-1", 5, "m", Result("text_response(finish_reason=stop)"))
    assert body["usage"] == {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
                             "prompt_tokens_details": {"cached_tokens": 2},
                             "completion_tokens_details": {"reasoning_tokens": 1}}
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "x",
                                             "refusal": None}
    last = oa.usage_chunk("chatcmpl-1", 5, "m", Result("x").usage)
    assert last["choices"] == [] and last["usage"]["total_tokens"] == 12
    assert usage_from(body["usage"]) == Result("x").usage


texts = st.text(min_size=1, max_size=20)


@given(st.lists(st.tuples(st.sampled_from(("user", "assistant", "system")), texts),
                max_size=8), texts)
def test_any_conversation_ending_with_a_user_message_is_accepted(earlier, last):
    messages = [{"role": r, "content": c} for r, c in earlier] + [{"role": "user",
                                                                    "content": last}]
    chat = oa.parse_chat_request({"model": "m", "messages": messages}, ("m",))
    assert chat.user_message == last
    kept = [(r, c) for r, c in earlier if r != "system"]
    assert [(m["role"], m["content"]) for m in chat.history or ()] == kept
    systems = [c for r, c in earlier if r == "system"]
    assert chat.system_message == ("\n\n".join(systems) or None)


def test_the_package_names_its_parts_and_loads_no_web_framework_until_asked():
    import subprocess
    import sys
    from pathlib import Path

    import pipeline.serve
    code = ("import sys, pipeline.serve, pipeline.cli.main; "
            "print(sorted(m for m in ('starlette', 'uvicorn', 'cronsim') if m in sys.modules))")
    root = Path(__file__).resolve().parents[3]
    loaded = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert loaded == "[]"
    assert pipeline.serve.__all__ == sorted(pipeline.serve.__all__)
    assert all(getattr(pipeline.serve, name) for name in pipeline.serve.__all__)
    with pytest.raises(AttributeError):
        pipeline.serve.Nothing  # noqa: B018
