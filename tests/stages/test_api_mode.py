"""Named examples for API mode resolution."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.errors import UsageError
from stages.log.api_mode import API_MODES, ApiModeDecision, resolve_api_mode, responses_only


def resolve(explicit=None, provider=None, base_url=None, model=None) -> ApiModeDecision:
    return resolve_api_mode(explicit=explicit, provider=provider, base_url=base_url, model=model)


def test_explicit_wins_over_everything() -> None:
    decision = resolve("codex_responses", provider="anthropic",
                       base_url="https://api.anthropic.com", model="claude-sonnet-4-5")
    assert decision == ApiModeDecision(mode="codex_responses", reason="explicit api_mode")
    assert resolve(" Anthropic_Messages ").mode == "anthropic_messages"


def test_unknown_explicit_mode_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown api_mode 'bedrock_converse'"):
        resolve("bedrock_converse")


@pytest.mark.parametrize(("provider", "mode"), [
    ("anthropic", "anthropic_messages"), ("Anthropic", "anthropic_messages"),
    ("openai-codex", "codex_responses"), ("xai", "codex_responses"),
])
def test_provider_specific(provider, mode) -> None:
    decision = resolve(provider=provider, base_url="https://openrouter.ai/api/v1", model="m")
    assert decision.mode == mode
    assert decision.reason == f"provider {provider.lower()!r}"


def test_provider_beats_base_url() -> None:
    assert resolve(provider="anthropic", base_url="https://api.openai.com/v1",
                   model="o1-pro").mode == "anthropic_messages"


@pytest.mark.parametrize(("base_url", "model", "mode", "reason"), [
    ("https://api.anthropic.com", "claude-opus-4", "anthropic_messages",
     "base URL host api.anthropic.com"),
    ("https://API.Anthropic.com/v1/", None, "anthropic_messages",
     "base URL host api.anthropic.com"),
    ("https://api.minimax.io/anthropic", "MiniMax-M2", "anthropic_messages",
     "base URL path ends with /anthropic"),
    ("https://dashscope.aliyuncs.com/apps/anthropic/", "qwen3", "anthropic_messages",
     "base URL path ends with /anthropic"),
    ("https://api.openai.com/v1", "gpt-5-codex", "codex_responses",
     "base URL host api.openai.com with Responses-only model 'gpt-5-codex'"),
    ("https://api.openai.com/v1", "openai/o1-pro", "codex_responses",
     "base URL host api.openai.com with Responses-only model 'openai/o1-pro'"),
    ("https://chatgpt.com/backend-api/codex", "gpt-5", "codex_responses",
     "base URL host chatgpt.com"),
    ("https://api.x.ai/v1", "grok-4", "codex_responses", "base URL host api.x.ai"),
    ("https://api.openai.com/v1", "gpt-4o", "chat_completions", "default"),
    ("https://openrouter.ai/api/v1", "openai/gpt-5-codex", "chat_completions", "default"),
    ("https://example.openai.azure.com/openai", "gpt-5-pro", "chat_completions", "default"),
    ("http://127.0.0.1:8080/v1", "local", "chat_completions", "default"),
    ("http://[::1", "m", "chat_completions", "default"),
    (None, None, "chat_completions", "default"),
])
def test_base_url_heuristics(base_url, model, mode, reason) -> None:
    assert resolve(provider="custom", base_url=base_url, model=model) == ApiModeDecision(
        mode=mode, reason=reason)


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt-5-codex", True), ("codex-mini-latest", True), ("o1-pro", True), ("o3-pro", True),
    ("gpt-5-pro", True), ("o3-deep-research", True), ("computer-use-preview", True),
    ("gpt-5", False), ("gpt-4o", False), ("o3", False), (None, False),
])
def test_responses_only_models(model, expected) -> None:
    assert responses_only(model) is expected


@settings(max_examples=100, deadline=None)
@given(provider=st.none() | st.text(max_size=20), base_url=st.none() | st.text(max_size=60),
       model=st.none() | st.text(max_size=20))
def test_total_without_explicit_mode(provider, base_url, model) -> None:
    decision = resolve(provider=provider, base_url=base_url, model=model)
    assert decision.mode in API_MODES and decision.reason
