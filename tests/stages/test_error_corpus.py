"""The classifier over a corpus of real provider error bodies, case by case.

``tests/corpus/errors/<provider>.json`` holds a list of cases, one a line: the provider, API mode, HTTP
status, headers, body (JSON, or text when the server sent text), optionally the adapter's
message and exception class and the session's size, the expected reason and action, and where
the shape comes from (provider docs, SDK and server sources, bodies quoted in public issues).
Each case becomes a ``ModelFailed`` the way the adapters build one (``code`` is the body's raw
``error.code``, an integer for llama.cpp, vLLM and OpenRouter; ``retry_after`` the header).

The action is what ``stages.recovery.chain`` does first for the classified error with retries left, a
second key in the pool and a fallback provider configured: ``compress`` (the request is too
big), ``rotate`` (another key), ``retry`` (the same request after a backoff), ``fallback`` (the
next provider), else ``fail``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stages.log.events import ModelFailed
from stages.recovery.classify import ClassifiedError, FailureReason, classify_api_error

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "errors"
PROVIDERS = {"openai", "anthropic", "openrouter", "azure", "gemini", "llamacpp", "vllm",
             "ollama", "litellm"}
ACTIONS = {"compress", "rotate", "retry", "fallback", "fail"}


def load_cases() -> list[dict]:
    cases = []
    for path in sorted(CORPUS.glob("*.json")):
        for number, case in enumerate(json.loads(path.read_text(encoding="utf-8")), 1):
            cases.append({**case, "where": f"{path.name} case {number}"})
    return cases


CASES = load_cases()


def adapter_code(body: object) -> object:
    """``error.code`` (``error.type`` for Anthropic's shape) as the adapters read it: raw."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    return error.get("code", error.get("type"))


def seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def failure_of(case: dict) -> ModelFailed:
    body = case.get("body")
    status = case["status"]
    headers = {k.lower(): v for k, v in (case.get("headers") or {}).items()}
    where = f"HTTP {status}" if status is not None else "error"
    return ModelFailed(
        error_type=case.get("error_type", "ProviderHTTPError"),
        message=case.get("message") or f"{where} from {case['provider']}",
        status=status, body=None if body is None else body if isinstance(body, str)
        else json.dumps(body), code=adapter_code(body),  # type: ignore[arg-type]
        retry_after=seconds(headers.get("retry-after")))


def action_of(result: ClassifiedError) -> str:
    if result.compress:
        return "compress"
    if result.rotate_credential:
        return "rotate"
    if result.retryable:
        return "retry"
    return "fallback" if result.fallback else "fail"


def classify_case(case: dict) -> ClassifiedError:
    return classify_api_error(failure_of(case), provider=case["provider"],
                              api_mode=case["api_mode"],
                              context_length=case.get("context_length"),
                              estimated_tokens=case.get("estimated_tokens", 0))


@pytest.mark.parametrize("case", CASES, ids=[f"{c['provider']}/{c['id']}" for c in CASES])
def test_corpus_case(case: dict) -> None:
    result = classify_case(case)
    expect = case["expect"]
    got = {"reason": str(result.reason), "action": action_of(result)}
    want = {"reason": expect["reason"], "action": expect["action"]}
    assert got == want, f"{case['where']}: {result.detail}"
    if "retry_after" in expect:
        assert result.retry_after is not None
        assert math.isclose(result.retry_after, expect["retry_after"], rel_tol=1e-6)
    if "output_limit" in expect:
        assert result.output_limit == expect["output_limit"]


def test_the_corpus_covers_every_provider_with_sources() -> None:
    assert len(CASES) >= 100
    assert {c["provider"] for c in CASES} == PROVIDERS
    ids = [f"{c['provider']}/{c['id']}" for c in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert case["source"].strip(), case["where"]
        assert case["expect"]["reason"] in {r.value for r in FailureReason}, case["where"]
        assert case["expect"]["action"] in ACTIONS, case["where"]
