"""Ask a server how large a model's window is: llama.cpp's ``/props`` (the ``n_ctx`` the
server runs with), else the OpenAI-compatible ``/models`` listing (vLLM's ``max_model_len``,
OpenRouter's ``context_length``, llama.cpp's ``meta.n_ctx_train``). A hint only: any failure
is no answer, and the table of known models remains."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

PROBE_TIMEOUT = 5.0
_MODEL_KEYS = ("context_length", "max_model_len", "context_window", "max_context_length")


def _get(url: str, api_key: str | None, timeout: float) -> Any:
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read(1_000_000))


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_props(props: object) -> int | None:
    if not isinstance(props, Mapping):
        return None
    settings = props.get("default_generation_settings")
    if isinstance(settings, Mapping) and (n := _positive(settings.get("n_ctx"))):
        return n
    return _positive(props.get("n_ctx"))


def _from_models(listing: object, model: str) -> int | None:
    items = listing.get("data") if isinstance(listing, Mapping) else None
    if not isinstance(items, list):
        return None
    entries = [i for i in items if isinstance(i, Mapping)]
    chosen = [i for i in entries if i.get("id") == model] or (entries if len(entries) == 1 else [])
    for item in chosen:
        for key in _MODEL_KEYS:
            if n := _positive(item.get(key)):
                return n
        meta = item.get("meta")
        if isinstance(meta, Mapping) and (n := _positive(meta.get("n_ctx_train"))):
            return n
    return None


def probe_context_window(base_url: str, model: str, *, api_key: str | None = None,
                         timeout: float = PROBE_TIMEOUT) -> tuple[int, str] | None:
    """``(tokens, source)`` from the server at ``base_url``, or None."""
    root = base_url.rstrip("/")
    server = root[:-3] if root.endswith("/v1") else root
    try:
        if n := _from_props(_get(f"{server}/props", api_key, timeout)):
            return n, "provider:/props"
    except (OSError, ValueError):
        pass
    try:
        if n := _from_models(_get(f"{root}/models", api_key, timeout), model):
            return n, "provider:/models"
    except (OSError, ValueError):
        pass
    return None


# The hosted APIs whose windows the table knows; any other endpoint (a llama.cpp or vLLM server
# behind the default "openai" provider included) is asked.
HOSTED_HOSTS = frozenset({"api.openai.com", "api.anthropic.com", "openrouter.ai"})


def self_hosted(base_url: str | None) -> bool:
    return bool(base_url) and urllib.parse.urlsplit(base_url).hostname not in HOSTED_HOSTS


def window_probe(api_key: str | None) -> Callable[[str, str | None], tuple[int, str] | None]:
    """A probe for self-hosted endpoints, whatever the provider is called; the hosted APIs'
    windows come from the table."""

    def probe(model: str, base_url: str | None) -> tuple[int, str] | None:
        if base_url is None or not self_hosted(base_url):
            return None
        return probe_context_window(base_url, model, api_key=api_key or None)
    return probe
