"""API mode resolution: which wire protocol a provider speaks, and why.

Order (the seeds' "API Modes"): an explicit ``api_mode`` wins; then the provider's own mode;
then base-URL heuristics; then ``chat_completions``. The decision carries its reason so the
event log records why a session talks to its provider the way it does.

Base-URL heuristics:

* host ``api.anthropic.com``, or a path ending in ``/anthropic`` (``/anthropic/v1`` too: the
  Anthropic-compatible endpoints of MiniMax, DashScope and others) -> ``anthropic_messages``;
* host ``chatgpt.com`` with a ``/backend-api/codex`` path, or host ``api.x.ai``
  -> ``codex_responses``;
* host ``api.openai.com`` with a model only the Responses API serves -> ``codex_responses``.
  Those models are the names (vendor prefix such as ``openai/`` stripped) containing one of
  :data:`RESPONSES_ONLY_MARKERS`: the Codex family (``gpt-5-codex``, ``codex-mini-latest``),
  the ``-pro`` reasoning models (``o1-pro``, ``o3-pro``, ``gpt-5-pro``), the deep-research
  models and ``computer-use-preview``. Other OpenAI models keep ``chat_completions``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import attrs

from stages.log.setting_checks import choice

CHAT_COMPLETIONS = "chat_completions"
CODEX_RESPONSES = "codex_responses"
ANTHROPIC_MESSAGES = "anthropic_messages"
API_MODES: tuple[str, ...] = (ANTHROPIC_MESSAGES, CHAT_COMPLETIONS, CODEX_RESPONSES)

PROVIDER_MODES: dict[str, str] = {
    "anthropic": ANTHROPIC_MESSAGES,
    "openai-codex": CODEX_RESPONSES,
    "xai": CODEX_RESPONSES,
    "xai-oauth": CODEX_RESPONSES,
}

RESPONSES_ONLY_MARKERS: tuple[str, ...] = (
    "codex", "o1-pro", "o3-pro", "gpt-5-pro", "deep-research", "computer-use-preview",
)


@attrs.frozen(kw_only=True)
class ApiModeDecision:
    mode: str
    reason: str


def resolve_api_mode(*, explicit: str | None, provider: str | None, base_url: str | None,
                     model: str | None) -> ApiModeDecision:
    """Decide the API mode; an explicit mode outside :data:`API_MODES` is a ``UsageError``."""
    if explicit:
        mode = explicit.strip().lower()
        choice("api_mode", mode, API_MODES, named=True)
        return ApiModeDecision(mode=mode, reason="explicit api_mode")
    name = (provider or "").strip().lower()
    if name in PROVIDER_MODES:
        return ApiModeDecision(mode=PROVIDER_MODES[name], reason=f"provider {name!r}")
    by_url = _from_base_url(base_url, model)
    if by_url is not None:
        return by_url
    return ApiModeDecision(mode=CHAT_COMPLETIONS, reason="default")


def responses_only(model: str | None) -> bool:
    """Whether only the Responses API serves ``model`` (see :data:`RESPONSES_ONLY_MARKERS`)."""
    name = (model or "").strip().lower().rsplit("/", 1)[-1]
    return any(marker in name for marker in RESPONSES_ONLY_MARKERS)


def _from_base_url(base_url: str | None, model: str | None) -> ApiModeDecision | None:
    host, path = _split(base_url)
    if not host:
        return None
    if host == "api.anthropic.com":
        return ApiModeDecision(mode=ANTHROPIC_MESSAGES, reason=f"base URL host {host}")
    if path.endswith(("/anthropic", "/anthropic/v1")):
        return ApiModeDecision(mode=ANTHROPIC_MESSAGES,
                               reason="base URL path ends with /anthropic")
    if (host == "chatgpt.com" and "/backend-api/codex" in path) or host == "api.x.ai":
        return ApiModeDecision(mode=CODEX_RESPONSES, reason=f"base URL host {host}")
    if host == "api.openai.com" and responses_only(model):
        return ApiModeDecision(mode=CODEX_RESPONSES,
                               reason=f"base URL host {host} with Responses-only model {model!r}")
    return None


def _split(base_url: str | None) -> tuple[str, str]:
    """Lower-case host and path without a trailing slash; ``("", "")`` when unparseable."""
    text = (base_url or "").strip()
    if not text:
        return "", ""
    if "://" not in text:
        text = "https://" + text
    try:
        parts = urlsplit(text)
        host = (parts.hostname or "").lower()
    except ValueError:
        return "", ""
    return host, parts.path.rstrip("/").lower()
