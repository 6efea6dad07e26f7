"""The values an ``Agent`` is built from, and how they are assembled.

* ``AgentSettings``: what the agent needs beyond the session's own settings
  (``stages.events.SessionSettings``, recorded in the log): where its state lives, how hard it
  syncs, how long a model call may take, how deep delegation goes. Checked when built.
* ``configure(...)``: the keyword arguments of ``Agent(...)`` / ``Agent.from_config(...)``,
  then the environment, then ``<home>/config.toml``, turned into those settings, the effects
  (the provider router over the key pool, or the caller's client) and the live set of secrets
  to redact. Nothing is started or logged before every value passed its check; a bad one is a
  ``UsageError`` naming the setting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import attrs

from effects.clock import RandomIds, SystemClock
from effects.eventlog import Durability
from effects.protocols import Clock, IdSource, ModelClient
from effects.tool_runner import MAX_RESULT_CHARS, ToolRunner
from pipeline import config as cfg
from pipeline.context import context_values, window_probe
from pipeline.memory import BuiltinMemory, MemoryManager, MemoryProvider
from pipeline.providers import (
    LOCAL,
    LOCAL_MAX_TOKENS,
    ProviderRouter,
    Refresh,
    Secrets,
    local_endpoint,
    pooled_keys,
    split_userinfo,
)
from pipeline.runner import Effects
from stages.api_mode import resolve_api_mode
from stages.budget import DELEGATION_MAX_ITERATIONS
from stages.credential_pool import STRATEGIES
from stages.errors import ProviderNotConfiguredError, UsageError
from stages.events import (
    CACHE_TTLS,
    PLATFORMS,
    SYSTEM_MESSAGE_MODES,
    ProviderEntry,
    SessionSettings,
)
from stages.reasoning_parts import parse_setting

__all__ = ["DEFAULT_DEADLINE", "DEFAULT_TIMEOUT", "AgentSettings", "Configured",
           "check_session_values", "checked", "configure", "positive_number"]

# Seconds without a byte before a model call fails (read timeout), and seconds a whole call may
# take, keep-alive bytes or not (the reference system's request timeout).
DEFAULT_TIMEOUT = 600.0
DEFAULT_DEADLINE = 1800.0
_DURABILITIES = get_args(Durability)


def positive_number(name: str, value: Any) -> float:
    """``value`` as seconds, or a ``UsageError`` naming the setting."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise UsageError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _positive_int(name: str, value: Any, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a whole number of at least 1, got {value!r}")


def _seconds(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    del instance
    if value is not None or attribute.name != "deadline":
        positive_number(attribute.name, value)


def _durability(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    del instance, attribute
    if value not in _DURABILITIES:
        raise UsageError(f"durability must be one of {', '.join(_DURABILITIES)}, got {value!r}")


def _delegation(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    del instance
    _positive_int(attribute.name, value)


@attrs.frozen(kw_only=True)
class AgentSettings:
    """The agent's settings that are not the session's: they may differ between two processes
    running the same session, so they are not logged."""

    home: Path = attrs.field(converter=lambda p: Path(p).expanduser())
    durability: Durability = attrs.field(default="durable", validator=_durability)
    # Read timeout of a model call, and its total deadline (None: no deadline).
    timeout: float = attrs.field(default=DEFAULT_TIMEOUT, validator=_seconds)
    deadline: float | None = attrs.field(default=DEFAULT_DEADLINE, validator=_seconds)
    delegation_max_iterations: int = attrs.field(default=DELEGATION_MAX_ITERATIONS,
                                                 validator=_delegation)
    # The session to continue (None: a new one), and the session that delegated to this one.
    session_id: str | None = None
    parent_session_id: str | None = None
    # A tool result longer than this is cut to a preview; the whole text is kept in a file.
    max_tool_result_chars: int = attrs.field(default=MAX_RESULT_CHARS, validator=_delegation)
    # The working directory whose context files the prompt carries (None: the process's).
    cwd: Path | None = attrs.field(default=None, converter=attrs.converters.optional(
        lambda p: Path(p).expanduser()))


def check_session_values(values: Mapping[str, Any]) -> None:
    """A ``UsageError`` naming the first bad value meant for ``SessionSettings``: checked at the
    edge, before the settings are built, so that a session that could never be resumed is
    never started."""
    _positive_int("max_turns", values.get("max_turns", 1))
    _positive_int("max_tokens", values.get("max_tokens"), optional=True)
    _positive_int("context_length", values.get("context_length"), optional=True)
    strategy = values.get("credential_strategy", STRATEGIES[0])
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown credential_strategy {strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)}")
    retries = values.get("max_retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UsageError(f"max_retries must be a whole number of at least 0, got {retries!r}")
    for name in ("retry_base_delay", "rate_limit_cooldown", "billing_cooldown"):
        value = values.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise UsageError(f"{name} must be a number of seconds, at least 0; got {value!r}")
    if values.get("cache_ttl", CACHE_TTLS[0]) not in CACHE_TTLS:
        raise UsageError(f"cache_ttl must be one of {', '.join(CACHE_TTLS)}, "
                         f"got {values['cache_ttl']!r}")
    for name, choices in (("platform", PLATFORMS), ("system_message_mode", SYSTEM_MESSAGE_MODES)):
        if values.get(name, choices[0]) not in choices:
            raise UsageError(f"{name} must be one of {', '.join(choices)}, got {values[name]!r}")


def checked(settings: SessionSettings) -> SessionSettings:
    """``settings`` after :func:`check_session_values` found nothing wrong in them."""
    check_session_values(attrs.asdict(settings, recurse=False))
    return settings


@attrs.frozen
class Configured:
    """What ``configure`` assembled: the values an ``Agent`` is built from."""

    settings: SessionSettings
    agent_settings: AgentSettings
    effects: Effects
    secrets: Secrets


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def configure(
    model: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
    provider: str | None = None, api_mode: str | None = None, max_turns: int = 500,
    max_tokens: int | None = None, context_length: int | None = None, stream: bool = True,
    identity: str | None = None, tool_choice: str | None = None, session_id: str | None = None,
    home: str | Path | None = None, durability: Durability = "durable",
    credentials: str | Sequence[str] = (), credential_strategy: str | None = None,
    credential_refresh: Refresh | None = None,
    fallback_providers: Sequence[Mapping[str, str] | ProviderEntry] | None = None,
    max_retries: int = 3, retry_base_delay: float = 2.0, rate_limit_cooldown: float = 60.0,
    billing_cooldown: float = 3600.0, prompt_caching: bool = True, cache_ttl: str = "5m",
    timeout: float | None = None, deadline: float | None = None,
    delegation_max_iterations: int = DELEGATION_MAX_ITERATIONS,
    parent_session_id: str | None = None, client: ModelClient | None = None,
    tool_runner: ToolRunner | None = None, clock: Clock | None = None,
    cheap_model: Mapping[str, str] | ProviderEntry | None = None,
    max_tool_result_chars: int = MAX_RESULT_CHARS,
    ids: IdSource | None = None, platform: str = "cli", system_message_mode: str = "append",
    load_context: bool = True, cwd: str | Path | None = None,
    memory_provider: MemoryProvider | None = None, compression: bool | None = None,
    preflight_threshold: float | None = None, between_turns_threshold: float | None = None,
    protect_last_n: int | None = None, summary_model: str | None = None,
    context_engine: str | None = None, reasoning: str | int | None = None,
) -> Configured:
    """The keyword arguments of ``Agent(...)``: arguments first, then the environment, then
    ``<home>/config.toml``. Every value is checked before anything is started or logged; a bad
    one is a ``UsageError`` naming it."""
    root = Path(home).expanduser() if home is not None else cfg.home()
    file = cfg.load_file(root)
    section = file.get("model", {})
    agent_settings = AgentSettings(
        home=root, durability=durability, delegation_max_iterations=delegation_max_iterations,
        timeout=_first(timeout, section.get("timeout"), DEFAULT_TIMEOUT),
        deadline=_first(deadline, section.get("deadline"), DEFAULT_DEADLINE),
        session_id=session_id, parent_session_id=parent_session_id,
        max_tool_result_chars=max_tool_result_chars, cwd=cwd)
    values: dict[str, Any] = {
        "max_turns": max_turns, "max_tokens": max_tokens, "context_length": context_length,
        "stream": stream, "identity": identity, "tool_choice": tool_choice,
        "max_retries": max_retries, "retry_base_delay": retry_base_delay,
        "rate_limit_cooldown": rate_limit_cooldown, "billing_cooldown": billing_cooldown,
        "prompt_caching": prompt_caching, "cache_ttl": cache_ttl, "platform": platform,
        "system_message_mode": system_message_mode, "load_context": load_context,
        "memory_provider": None if memory_provider is None else memory_provider.name,
        **_pool_values(file, credentials, credential_strategy, credential_refresh,
                       fallback_providers),
        "cheap_model": None if cheap_model is None else cfg.provider_entry(cheap_model),
        **context_values(file.get("context", {}), compression=compression,
                         preflight_threshold=preflight_threshold,
                         between_turns_threshold=between_turns_threshold,
                         protect_last_n=protect_last_n, summary_model=summary_model,
                         context_engine=context_engine)}
    if values["context_length"] is None:
        values["context_length"] = file.get("context", {}).get("context_length")
    values.update(parse_setting(_first(reasoning, section.get("reasoning"))))
    check_session_values(values)
    endpoints: dict[str, Callable[[], str]] = {}
    if client is not None:
        resolved = cfg.ProviderConfig(provider=provider or "custom", model=model or "scripted",
                                      base_url=base_url or "", api_key=api_key or "")
    else:
        resolved = _resolve(model, base_url, api_key, provider, file, root, endpoints)
        if resolved.provider == LOCAL and values["max_tokens"] is None:
            values["max_tokens"] = LOCAL_MAX_TOKENS
    settings = _session_settings(resolved, api_mode or section.get("api_mode"), values)
    effects = Effects(clock=clock or SystemClock(), ids=ids or RandomIds(), model=client,
                      tools=tool_runner, memory=MemoryManager(BuiltinMemory(root), memory_provider))
    userinfo = split_userinfo(resolved.base_url or None)[1]
    if client is not None:
        secrets = Secrets((resolved.api_key, userinfo, (userinfo or "").partition(":")[2]))
        return Configured(settings, agent_settings, effects, secrets)
    router = ProviderRouter(
        default_key=resolved.api_key or cfg.KEYLESS, keys=pooled_keys(settings),
        timeout=agent_settings.timeout, deadline=agent_settings.deadline,
        refresh_hook=credential_refresh, endpoints=endpoints,
        userinfo={settings.base_url: userinfo} if settings.base_url and userinfo else None)
    effects = attrs.evolve(effects, model=router, refresh=router.refresh,
                           window_probe=window_probe(resolved.provider, resolved.api_key))
    return Configured(settings, agent_settings, effects, router.secrets)


def _pool_values(file: Mapping[str, Any], credentials: str | Sequence[str],
                 strategy: str | None, refresh: Refresh | None,
                 fallbacks: Sequence[Mapping[str, str] | ProviderEntry] | None
                 ) -> dict[str, Any]:
    """The key pool and the fallback chain, from the arguments or else config.toml."""
    section = file.get("model", {})
    if fallbacks is None:
        fallbacks = file.get("fallback_providers", ())
    return {"credentials": cfg.credential_labels(credentials or section.get("credentials")),
            "credential_strategy": _first(strategy, section.get("credential_strategy"),
                                          "round_robin"),
            "credential_refresh": refresh is not None,
            "fallback_providers": tuple(cfg.provider_entry(f) for f in fallbacks)}


def _session_settings(resolved: cfg.ProviderConfig, api_mode: str | None,
                      values: dict[str, Any]) -> SessionSettings:
    """The logged settings: the endpoint without credentials, the API mode resolved."""
    bare_url = split_userinfo(resolved.base_url or None)[0]
    mode = resolve_api_mode(explicit=api_mode, provider=resolved.provider, base_url=bare_url,
                            model=resolved.model)
    return SessionSettings(model=resolved.model, provider=resolved.provider, base_url=bare_url,
                           api_mode=mode.mode, api_mode_reason=mode.reason, **values)


def _resolve(model: str | None, base_url: str | None, api_key: str | None,
             provider: str | None, file: dict, root: Path,
             endpoints: dict[str, Callable[[], str]]) -> cfg.ProviderConfig:
    """The configured provider, else the embedded local model (its URL as a function in
    ``endpoints``: the server may be restarted)."""
    try:
        return cfg.resolve_provider(model=model, base_url=base_url, api_key=api_key,
                                    provider=provider, file=file)
    except ProviderNotConfiguredError as missing:
        local_model, endpoints[LOCAL] = local_endpoint(root, missing)
        return cfg.ProviderConfig(provider=LOCAL, model=local_model,
                                  base_url=endpoints[LOCAL](), api_key=cfg.KEYLESS)
