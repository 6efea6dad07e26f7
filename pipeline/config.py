"""Where mibyan finds its settings: explicit arguments, then the environment, then
``$MIBYAN_HOME/config.toml`` (``MIBYAN_HOME`` defaults to ``~/.mibyan``).

Secrets come from the environment only (the config file names the variable, ``api_key_env``),
so the file can be shared and nothing secret is ever copied into a log.

    [model]
    name = "gpt-4o-mini"
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    provider = "openai"

    credentials = ["OPENAI_API_KEY", "OPENAI_API_KEY_2"]   # a pool: labels of env variables
    api_mode = "chat_completions"  # or codex_responses, anthropic_messages (else detected)

    [[fallback_providers]]
    provider = "anthropic"
    model = "claude-sonnet-4-5"
    key_env = "ANTHROPIC_API_KEY"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

import attrs

from stages.api_mode import resolve_api_mode
from stages.errors import ProviderNotConfiguredError, UsageError
from stages.events import ProviderEntry

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
KEYLESS = "no-key"


def home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("MIBYAN_HOME") or Path.home() / ".mibyan").expanduser()


def load_file(root: Path) -> dict:
    path = root / "config.toml"
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from exc


@attrs.frozen(kw_only=True)
class ProviderConfig:
    provider: str
    model: str
    base_url: str
    api_key: str = attrs.field(repr=False)


ANTHROPIC_BASE_URL = "https://api.anthropic.com"
# Each provider's usual key variable and endpoint.
PROVIDER_DEFAULTS = {"openai": ("OPENAI_API_KEY", OPENAI_BASE_URL),
                     "anthropic": ("ANTHROPIC_API_KEY", ANTHROPIC_BASE_URL)}


def resolve_provider(*, model: str | None = None, base_url: str | None = None,
                     api_key: str | None = None, provider: str | None = None,
                     env: Mapping[str, str] | None = None,
                     file: Mapping | None = None) -> ProviderConfig:
    """The endpoint to talk to, or ``ProviderNotConfiguredError`` naming what was consulted."""
    env = os.environ if env is None else env
    section = dict((file or {}).get("model", {}))
    provider = provider or section.get("provider") or "openai"
    usual_key, usual_url = PROVIDER_DEFAULTS.get(provider, ("OPENAI_API_KEY", OPENAI_BASE_URL))
    key_env = section.get("api_key_env", usual_key)
    base_url = base_url or env.get("OPENAI_BASE_URL") or section.get("base_url")
    api_key = api_key or env.get(key_env) or env.get(usual_key)
    model = model or env.get("MIBYAN_MODEL") or section.get("name")
    if base_url is None and api_key is None:
        raise ProviderNotConfiguredError(
            "no model provider is configured. mibyan looked for: --base-url and --model, "
            f"the environment variables OPENAI_BASE_URL, {key_env}"
            f"{'' if key_env == usual_key else ', ' + usual_key} and MIBYAN_MODEL, "
            f"and [model] name/base_url/api_key_env in {home(env) / 'config.toml'}")
    base_url = base_url or usual_url
    if model is None:
        if base_url.rstrip("/") != OPENAI_BASE_URL:
            raise ProviderNotConfiguredError(
                f"no model name for {base_url}: pass --model, set MIBYAN_MODEL, "
                "or set [model] name in config.toml")
        model = DEFAULT_OPENAI_MODEL
    return ProviderConfig(provider=provider, model=model, base_url=base_url,
                          api_key=api_key or KEYLESS)


DEFAULT_BASE_URLS = {"anthropic_messages": ANTHROPIC_BASE_URL,
                     "codex_responses": OPENAI_BASE_URL, "chat_completions": OPENAI_BASE_URL}


def provider_entry(raw: Mapping | ProviderEntry) -> ProviderEntry:
    """A fallback provider from ``{provider, model, base_url?, api_mode?, key_env?}`` (the
    shape of ``[[fallback_providers]]`` in config.toml)."""
    if isinstance(raw, ProviderEntry):
        return raw
    unknown = set(raw) - {"provider", "model", "base_url", "api_mode", "key_env", "api_key_env"}
    if unknown or "provider" not in raw or "model" not in raw:
        raise UsageError(f"a fallback provider needs provider and model (and may have base_url, "
                         f"api_mode, key_env); got {dict(raw)!r}")
    mode = resolve_api_mode(explicit=raw.get("api_mode"), provider=raw["provider"],
                            base_url=raw.get("base_url"), model=raw["model"]).mode
    key_env = raw.get("key_env") or raw.get("api_key_env")
    return ProviderEntry(provider=raw["provider"], model=raw["model"], api_mode=mode,
                         base_url=raw.get("base_url") or DEFAULT_BASE_URLS[mode],
                         credentials=(key_env,) if key_env else ())
