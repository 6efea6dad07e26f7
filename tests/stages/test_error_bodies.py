"""Reading an error body is total: any shape classifies to a reason and nothing raises.

Issue 8: llama.cpp, vLLM and OpenRouter send an integer ``error.code``; the adapters passed it
on as ``ModelFailed.code`` and ``stages/recovery/error_text.py`` called ``.strip()`` on it, so the
``AttributeError`` escaped the turn. The named tests below failed before the fix; the
properties cover every other shape a body or a field may take.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.log.events import ModelFailed
from stages.recovery.classify import ACTIONS, ClassifiedError, FailureReason, classify_api_error

R = FailureReason


def classify(failure: ModelFailed, **kwargs) -> ClassifiedError:
    return classify_api_error(failure, provider="local", api_mode="chat_completions", **kwargs)


def http_failure(status: int | None, body: object, *, code: object = None,
                 message: object = "HTTP error") -> ModelFailed:
    text = body if isinstance(body, str) else json.dumps(body)
    return ModelFailed(error_type="ProviderHTTPError", message=message, status=status,
                       body=text, code=code)  # type: ignore[arg-type]


# --- the crash of issue 8, case by case ---------------------------------------------------------

LLAMA_OVERFLOW = {"error": {"code": 400, "message": "the request exceeds the available context "
                            "size, try increasing it", "type": "exceed_context_size_error",
                            "n_prompt_tokens": 9000, "n_ctx": 8192}}
LLAMA_500 = {"error": {"code": 500, "message": "Context size has been exceeded.",
                       "type": "server_error"}}
VLLM_404 = {"object": "error", "message": "The model `gpt-9` does not exist.",
            "type": "NotFoundError", "param": None, "code": 404}
OPENROUTER_402 = {"error": {"code": 402, "message": "Insufficient credits. Add more using "
                            "https://openrouter.ai/credits"}}


def test_llama_cpp_integer_code_on_an_overflow_is_read() -> None:
    result = classify(http_failure(400, LLAMA_OVERFLOW, code=400))
    assert result.reason == R.CONTEXT_OVERFLOW


def test_llama_cpp_integer_code_on_a_500_overflow_is_read() -> None:
    result = classify(http_failure(500, LLAMA_500, code=500))
    assert result.reason == R.CONTEXT_OVERFLOW


def test_vllm_integer_code_is_read() -> None:
    assert classify(http_failure(404, VLLM_404, code=404)).reason == R.MODEL_NOT_FOUND


def test_openrouter_integer_code_is_read() -> None:
    assert classify(http_failure(402, OPENROUTER_402, code=402)).reason == R.BILLING


@pytest.mark.parametrize("code", [0, -1, 10**30, 4.5, float("nan"), True, [], {"a": 1}, b"x"],
                         ids=repr)
def test_any_code_value_is_read(code: object) -> None:
    in_body = repr(code) if isinstance(code, bytes) else code
    result = classify(http_failure(429, {"error": {"code": in_body, "message": "slow down"}},
                                   code=code))
    assert result.reason == R.RATE_LIMIT


def test_fields_of_the_wrong_type_are_read() -> None:
    wrong: dict[str, object] = {"error_type": None, "message": 500, "status": "429",
                                "body": b'{"error": 1}', "code": 429, "retry_after": "soon"}
    failure = ModelFailed(**wrong)  # type: ignore[arg-type]
    result = classify(failure)
    assert result.reason == R.RATE_LIMIT and result.retry_after is None


# --- bodies of any shape ----------------------------------------------------------------------

_KEYS = st.sampled_from(["error", "message", "code", "type", "status", "metadata", "raw",
                         "provider_name", "detail", "details", "retryDelay", "reason",
                         "quotaId", "object", "param"]) | st.text(max_size=8)
_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats()
            | st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40))
_TREES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(_KEYS, inner, max_size=5), max_leaves=40)
ODD_BODIES = [
    "", " ", "null", "0", "[]", "{}", '"error"', "[1, 2]", '{"error": null}', '{"error": []}',
    '{"error": {"error": {"error": {"message": 5}}}}', "{not json",
    "<html><body><h1>502 Bad Gateway</h1></body></html>", "\ud800\udfff lone surrogates \udc00", "x" * 300_000,
    "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000,
    json.dumps({"error": {"message": "m" * 250_000}}), '{"error": {"metadata": {"raw": "[[["}}}',
    json.dumps({"error": {"metadata": {"raw": json.dumps({"error": {"code": 429}})}}}),
    '{"error": {"retryDelay": "9999999999999h"}}', "NaN", "Infinity", "-Infinity",
]
_BODIES = (st.none() | _TREES.map(json.dumps)
           | st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=400)
           | st.sampled_from(ODD_BODIES))
_ANY = _SCALARS | st.lists(st.integers(), max_size=2) | st.binary(max_size=10)
STATUSES = [None, 400, 401, 402, 403, 404, 405, 408, 409, 413, 422, 429, 451, 499, 500, 501, 502,
            503, 504, 529, 599]


def check(result: ClassifiedError, failure: ModelFailed) -> None:
    assert isinstance(result.reason, FailureReason)
    assert isinstance(result.detail, str) and result.detail
    if failure.partial is not True:
        assert attrs_tuple(ACTIONS[result.reason]) == attrs_tuple(result)
    if result.retry_after is not None:
        assert math.isfinite(result.retry_after) and result.retry_after >= 0
    if result.output_limit is not None:
        assert isinstance(result.output_limit, int) and result.output_limit > 0


def attrs_tuple(actions: object) -> tuple[bool, ...]:
    return (actions.retryable, actions.rotate_credential, actions.compress, actions.fallback,
            actions.abort)


@pytest.mark.parametrize("status", STATUSES, ids=str)
@settings(max_examples=40, deadline=None)
@given(body=_BODIES, code=_ANY, message=_ANY, error_type=_ANY, retry_after=_ANY,
       partial=st.booleans(), context_length=st.none() | st.integers(-5, 10**6),
       estimated=st.integers(0, 2 * 10**6))
def test_any_body_classifies_to_a_reason(status, body, code, message, error_type, retry_after,
                                         partial, context_length, estimated) -> None:
    failure = ModelFailed(error_type=error_type, message=message, status=status, body=body,
                          code=code, retry_after=retry_after, partial=partial)
    result = classify(failure, context_length=context_length, estimated_tokens=estimated)
    check(result, failure)


@pytest.mark.parametrize("body", ODD_BODIES, ids=lambda b: repr(b[:30]))
@pytest.mark.parametrize("status", STATUSES, ids=str)
def test_odd_bodies_classify_at_every_status(status, body) -> None:
    failure = http_failure(status, body, code=status)
    check(classify(failure, context_length=8192, estimated_tokens=9000), failure)
