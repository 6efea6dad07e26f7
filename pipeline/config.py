"""Where mibyan finds its settings: explicit arguments, then the environment, then
``$MIBYAN_HOME/config.toml`` (``MIBYAN_HOME`` defaults to ``~/.mibyan``).

Each provider reads its own variables (openai: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``;
anthropic: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``; openrouter: ``OPENROUTER_API_KEY``,
``OPENROUTER_BASE_URL``; any other name: OpenAI's). Secrets come from the environment only
(the config file names the variable, ``api_key_env``),
so the file can be shared and nothing secret is ever copied into a log. Only when nothing at
all is named (no model, provider, endpoint or key) does the embedded local model run; a resumed
session goes on with the endpoint it recorded (``resume_provider``).

    [model]
    name = "gpt-4o-mini"
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    provider = "openai"

    credentials = ["OPENAI_API_KEY", "OPENAI_API_KEY_2"]   # a pool: labels of env variables
    credential_strategy = "round_robin"  # or least_used, fill_first
    api_mode = "chat_completions"  # or codex_responses, anthropic_messages (else detected)
    timeout = 600      # seconds without a byte before a model call fails
    deadline = 1800    # seconds a whole model call may take (default: three timeouts)
    record_tokens = false  # record token ids and logprobs of each reply (RL export)

    [tokens]
    tokenizer = "HuggingFaceTB/SmolLM2-135M-Instruct"  # or a folder, or a .gguf file

    [[fallback_providers]]
    provider = "anthropic"
    model = "claude-sonnet-4-5"
    key_env = "ANTHROPIC_API_KEY"
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from effects.logs import get_logger
from effects.providers.anthropic_messages import AUTH_TOKEN_ENV
from effects.providers.http_errors import endpoint_label
from pipeline.providers import LOCAL, split_userinfo
from stages.errors import ProviderNotConfiguredError, SettingError, UsageError
from stages.log.api_mode import resolve_api_mode
from stages.log.events import ProviderEntry, SessionSettings
from stages.log.reasoning_parts import parse_setting

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
KEYLESS = "no-key"
_log = get_logger(__name__)


def home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("MIBYAN_HOME") or Path.home() / ".mibyan").expanduser()


def load_file(root: Path) -> dict:
    """config.toml under ``root``, its shape checked (``{}`` when there is none)."""
    path = root / "config.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    try:
        file = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from exc
    check_file(file, path)
    return file


# The [model] keys and the type each must have.
_MODEL_KEYS: dict[str, tuple[type, ...]] = {
    "name": (str,), "base_url": (str,), "api_key_env": (str,), "provider": (str,),
    "api_mode": (str,), "credentials": (str, list), "credential_strategy": (str,),
    "timeout": (int, float), "deadline": (int, float), "reasoning": (str, int),
    "record_tokens": (bool,)}
_TYPE_NAMES = {str: "a string", list: "a list", int: "a number", float: "a number",
               bool: "true or false"}


SECTIONS = frozenset({"model", "fallback_providers", "context", "local", "serve", "prices",
                      "sandbox", "mcp", "telemetry", "output", "logs", "tokens"})
"""The top-level tables of config.toml; another name is most likely a misspelling."""


def check_file(file: Mapping[str, Any], path: Path) -> None:
    """A ``UsageError`` naming the first setting of the wrong shape; a warning for a table
    mibyan does not read (``[modle]`` would otherwise be ignored without a word)."""
    for name in sorted(set(file) - SECTIONS):
        close = difflib.get_close_matches(name, SECTIONS, n=1)
        _warn_once(path, f"{path}: unknown section [{name}], ignored"
                   + (f" (did you mean [{close[0]}]?)" if close else
                      f" (known: {', '.join(sorted(SECTIONS))})"))
    section = file.get("model", {})
    if not isinstance(section, dict):
        raise UsageError(f"{path}: model must be a table ([model] with name = ..., ...), "
                         f"got {section!r}")
    for key, value in section.items():
        if key not in _MODEL_KEYS:
            raise UsageError(f"{path}: unknown setting [model] {key}; expected one of "
                             f"{', '.join(sorted(_MODEL_KEYS))}")
        types = _MODEL_KEYS[key]
        # bool is an int: a number given as true is no number (and 1 no boolean).
        if isinstance(value, bool) != (bool in types) or not isinstance(value, types):
            expected = " or ".join(dict.fromkeys(_TYPE_NAMES[t] for t in types))
            raise UsageError(f"{path}: [model] {key} must be {expected}, got {value!r}")
    _check_logs(file.get("logs", {}), path)
    _check_tokens(file.get("tokens", {}), path)
    fallbacks = file.get("fallback_providers", [])
    if not isinstance(fallbacks, list) or not all(isinstance(f, dict) for f in fallbacks):
        raise UsageError(f"{path}: fallback_providers must be tables ([[fallback_providers]]), "
                         f"got {fallbacks!r}")


def _check_one_setting(section: object, path: Path, table: str, key: str, example: str,
                       valid: Callable[[object], bool], wanted: str) -> None:
    """A table of one setting (``[logs] require_signed``, ``[tokens] tokenizer``)."""
    if not isinstance(section, dict):
        raise UsageError(f"{path}: {table} must be a table ([{table}] {key} = {example}), "
                         f"got {section!r}")
    for name, value in section.items():
        if name != key:
            raise UsageError(f"{path}: unknown setting [{table}] {name}; expected {key}")
        if not valid(value):
            raise UsageError(f"{path}: [{table}] {key} must be {wanted}, got {value!r}")


_SETTINGS_FIELDS = attrs.fields_dict(SessionSettings)


def settings_table(table: str, section: object, given: Mapping[str, Any],
                   keys: Mapping[str, str]) -> dict[str, Any]:
    """The recorded settings a config.toml table sets (``keys``: its key -> the
    ``SessionSettings`` field), each replaced by the argument of the field's name in ``given``
    where that is not None; checked by the field's own validator, so that a bad value is a
    ``UsageError`` naming the table and key (or the argument) it came from."""
    if not isinstance(section, Mapping):
        raise UsageError(f"[{table}] in config.toml must be a table, got {section!r}")
    if unknown := set(section) - set(keys):
        raise UsageError(f"unknown setting [{table}] {sorted(unknown)[0]}; expected one of "
                         f"{', '.join(sorted(keys))}")
    out: dict[str, Any] = {}
    for key, name in keys.items():
        argument = given.get(name)
        value = section.get(key) if argument is None else argument
        if value is None:
            continue
        field = _SETTINGS_FIELDS[name]
        assert field.validator is not None
        try:
            field.validator(None, field, value)
        except SettingError as exc:
            # The validator names the field; a value from the file also names where it is.
            raise UsageError(str(exc) if argument is not None
                             else f"[{table}] {key}: {exc}") from exc
        out[name] = value
    return out


def _check_logs(section: object, path: Path) -> None:
    """``[logs]``: ``require_signed`` (read by the log readers, effects.eventlog.keys)."""
    _check_one_setting(section, path, "logs", "require_signed", "true",
                       lambda v: isinstance(v, bool), "true or false")


def _check_tokens(section: object, path: Path) -> None:
    """``[tokens]``: ``tokenizer``, the one a token-recording session tokenises with."""
    _check_one_setting(section, path, "tokens", "tokenizer", '"..."',
                       lambda v: isinstance(v, str) and bool(v.strip()),
                       "a name, a folder or a .gguf file")


_warned: set[tuple[Path, str]] = set()


def _warn_once(path: Path, text: str) -> None:
    if (path, text) not in _warned:
        _warned.add((path, text))
        _log.warning("config.unknown_section", detail=text)


def credential_labels(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """A pool's labels: a list of environment variable names, or one name as a string."""
    if value is None:
        return ()
    labels = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(label, str) and label for label in labels):
        raise UsageError(f"credentials must be names of environment variables, got {value!r}")
    return labels


@attrs.frozen(kw_only=True)
class ProviderConfig:
    provider: str
    model: str
    base_url: str
    api_key: str = attrs.field(repr=False)


ANTHROPIC_BASE_URL = "https://api.anthropic.com"
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"


@attrs.frozen
class ProviderVariables:
    """A provider's own environment variables and its hosted endpoint."""

    key_env: str
    url_env: str
    default_url: str


OPENAI_VARIABLES = ProviderVariables("OPENAI_API_KEY", "OPENAI_BASE_URL", OPENAI_BASE_URL)
# Each provider reads only its own variables; any other name is an OpenAI-compatible endpoint.
PROVIDER_VARIABLES = {
    "openai": OPENAI_VARIABLES,
    "anthropic": ProviderVariables("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", ANTHROPIC_BASE_URL),
    "openrouter": ProviderVariables("OPENROUTER_API_KEY", "OPENROUTER_BASE_URL",
                                    OPENROUTER_BASE_URL),
}


def resolve_provider(*, model: str | None = None, base_url: str | None = None,
                     api_key: str | None = None, provider: str | None = None,
                     env: Mapping[str, str] | None = None, file: Mapping | None = None,
                     pooled: bool = False) -> ProviderConfig:
    """The endpoint a new session talks to (``pooled``: a key pool gives the keys).
    ``ProviderNotConfiguredError``, naming what was consulted, only when nothing at all was
    chosen: the one case for the embedded local model. A model or provider chosen without the
    key or endpoint it needs is a ``UsageError`` naming the variable to set. Provider
    ``local`` is the embedded model (its endpoint is found by ``pipeline.settings``)."""
    env = os.environ if env is None else env
    section = dict((file or {}).get("model", {}))
    model = model or env.get("MIBYAN_MODEL") or section.get("name")
    chosen = provider or section.get("provider")
    provider = chosen or "openai"
    if provider == LOCAL:
        if base_url is None:  # the embedded server, started by pipeline.settings
            return ProviderConfig(provider=LOCAL, model=model or "", base_url="", api_key=KEYLESS)
        if model is None:  # a llama.cpp server of the caller's own
            raise UsageError(f"no model name for local at {endpoint_label(base_url)}: pass "
                             "--model, set MIBYAN_MODEL, or set [model] name in config.toml")
        return ProviderConfig(provider=LOCAL, model=model, base_url=base_url,
                              api_key=api_key or KEYLESS)
    own = PROVIDER_VARIABLES.get(provider, OPENAI_VARIABLES)
    key_env = section.get("api_key_env", own.key_env)
    base_url = base_url or env.get(own.url_env) or section.get("base_url")
    api_key = (api_key or env.get(key_env) or env.get(own.key_env)
               or (env.get(AUTH_TOKEN_ENV) if provider == "anthropic" else None))
    if base_url is None and api_key is None and not pooled \
            and not (model or chosen or "api_key_env" in section):
        raise ProviderNotConfiguredError(
            "no model provider is configured. mibyan looked for: --base-url and --model, "
            f"the environment variables {own.url_env}, {key_env}"
            f"{'' if key_env == own.key_env else ', ' + own.key_env} and MIBYAN_MODEL, "
            f"and [model] name/base_url/api_key_env in {home(env) / 'config.toml'}")
    base_url = base_url or own.default_url
    _check_key(provider, model, base_url, bool(api_key) or pooled, key_env, own.url_env)
    if model is None:
        if base_url.rstrip("/") != OPENAI_BASE_URL:
            raise UsageError(
                f"no model name for {provider} at {endpoint_label(base_url)}: pass --model, "
                "set MIBYAN_MODEL, or set [model] name in config.toml")
        model = DEFAULT_OPENAI_MODEL
    return ProviderConfig(provider=provider, model=model, base_url=base_url,
                          api_key=api_key or KEYLESS)


def resume_provider(session: SessionSettings, *, model: str | None = None,
                    base_url: str | None = None, api_key: str | None = None,
                    provider: str | None = None, env: Mapping[str, str] | None = None,
                    file: Mapping | None = None, pooled: bool = False) -> ProviderConfig:
    """The endpoint a resumed session goes on with: the one it recorded, each of provider,
    model and base URL replaced only by an argument (``MIBYAN_MODEL``, ``OPENAI_BASE_URL`` and
    config.toml choose for new sessions); its key from the environment, as the log holds none.
    Another provider, or another model or endpoint for a session on the embedded model, is
    resolved as for a new session."""
    env = os.environ if env is None else env
    if provider not in (None, session.provider) \
            or (session.provider == LOCAL and provider is None and (model or base_url)):
        return resolve_provider(model=model or (None if session.provider == LOCAL
                                                else session.model),
                                base_url=base_url, api_key=api_key, provider=provider, env=env,
                                file=file, pooled=pooled)
    model = model or session.model
    if session.provider == LOCAL:
        return ProviderConfig(provider=LOCAL, model=model, base_url="", api_key=KEYLESS)
    section = dict((file or {}).get("model", {}))
    own = PROVIDER_VARIABLES.get(session.provider, OPENAI_VARIABLES)
    key_env = section.get("api_key_env", own.key_env)
    # The log holds the URL without its credentials: the configured URL it came from has them.
    base_url = base_url or next(
        (url for url in (env.get(own.url_env), section.get("base_url"))
         if url and _without_userinfo(url) == session.base_url),
        session.base_url or own.default_url)
    api_key = (api_key or env.get(key_env) or env.get(own.key_env)
               or (env.get(AUTH_TOKEN_ENV) if provider == "anthropic" else None))
    _check_key(session.provider, model, base_url, bool(api_key) or pooled, key_env,
               own.url_env)
    return ProviderConfig(provider=session.provider, model=model, base_url=base_url,
                          api_key=api_key or KEYLESS)


def _without_userinfo(url: str) -> str | None:
    try:
        return split_userinfo(url)[0]
    except ValueError:  # not a URL: it is not the one the session recorded
        return None


# The hosted endpoints: they answer nothing without a key.
_HOSTED_URLS = frozenset(v.default_url for v in PROVIDER_VARIABLES.values())


def _check_key(provider: str, model: str | None, base_url: str, keyed: bool, key_env: str,
               url_env: str) -> None:
    if not keyed and endpoint_label(base_url).rstrip("/") in _HOSTED_URLS:
        what = f"the model {model!r} of {provider}" if model else provider
        raise UsageError(
            f"{what} ({endpoint_label(base_url)}) needs a key, and {key_env} is not set: "
            f"export {key_env}=... (or point --base-url or {url_env} at an endpoint that needs "
            "none). mibyan runs the embedded local model only when no model or provider is "
            "named at all")


DEFAULT_BASE_URLS = {"anthropic_messages": ANTHROPIC_BASE_URL,
                     "codex_responses": OPENAI_BASE_URL, "chat_completions": OPENAI_BASE_URL}


def provider_entry(raw: Mapping | ProviderEntry) -> ProviderEntry:
    """A fallback provider from ``{provider, model, base_url?, api_mode?, key_env?}`` (the
    shape of ``[[fallback_providers]]`` in config.toml)."""
    if isinstance(raw, ProviderEntry):
        return raw
    unknown = set(raw) - {"provider", "model", "base_url", "api_mode", "key_env", "api_key_env",
                          "context_length", "reasoning"}
    if unknown or "provider" not in raw or "model" not in raw:
        raise UsageError(f"a fallback provider needs provider and model (and may have base_url, "
                         f"api_mode, key_env); got {dict(raw)!r}")
    mode = resolve_api_mode(explicit=raw.get("api_mode"), provider=raw["provider"],
                            base_url=raw.get("base_url"), model=raw["model"]).mode
    key_env = raw.get("key_env") or raw.get("api_key_env")
    try:
        return ProviderEntry(provider=raw["provider"], model=raw["model"], api_mode=mode,
                             base_url=raw.get("base_url") or DEFAULT_BASE_URLS[mode],
                             credentials=(key_env,) if key_env else (),
                             context_length=raw.get("context_length"),
                             **parse_setting(raw.get("reasoning")))
    except SettingError as bad:  # the entry's validators: say which entry they refused
        raise UsageError(f"a fallback provider's {bad}") from None
