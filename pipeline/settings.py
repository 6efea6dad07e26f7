"""The values an ``Agent`` is built from, and how they are assembled.

* ``AgentSettings``: what the agent needs beyond the session's own settings
  (``stages.log.events.SessionSettings``, recorded in the log): where its state lives, how hard it
  syncs, how long a model call may take, how deep delegation goes. Checked when built.
* ``configure(...)``: the keyword arguments of ``Agent(...)`` / ``Agent.from_config(...)``,
  then the environment, then ``<home>/config.toml``, turned into those settings, the effects
  (the provider router over the key pool, or the caller's client) and the live set of secrets
  to redact. Nothing is started or logged before every value passed its check; a bad one is a
  ``UsageError`` naming the setting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlsplit

import attrs

from effects.clock import RandomIds, SystemClock
from effects.eventlog import lineage
from effects.eventlog.codec import from_payload
from effects.eventlog.store import Durability, read_envelopes, session_path
from effects.performers import Effects
from effects.protocols import Clock, IdSource, ModelClient
from effects.providers.http_errors import endpoint_label
from effects.providers.window_probe import window_probe
from effects.tools.executor import MAX_RESULT_CHARS, ToolRunner
from pipeline import config as cfg
from pipeline.context_settings import context_values
from pipeline.memory_providers import BuiltinMemory, MemoryManager, MemoryProvider
from pipeline.output_types import output_values
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
from pipeline.sandbox_settings import sandbox_values
from stages.errors import ProviderNotConfiguredError, UsageError
from stages.log.api_mode import resolve_api_mode
from stages.log.events import (
    ProviderEntry,
    SessionForked,
    SessionResumed,
    SessionSettings,
    SessionStarted,
)
from stages.log.reasoning_parts import parse_setting
from stages.log.setting_checks import default_deadline, one_of, positive_seconds, whole
from stages.turn.budget import DELEGATION_MAX_ITERATIONS

__all__ = ["DEFAULT_DEADLINE", "DEFAULT_TIMEOUT", "AgentSettings", "Configured",
           "check_session_values", "checked", "configure"]

# Seconds without a byte before a model call fails (read timeout), and seconds a whole call may
# take, keep-alive bytes or not, when no timeout is given either: three read timeouts, as
# whenever a timeout is given and a deadline is not (the reference system's request timeout).
DEFAULT_TIMEOUT = 600.0
DEFAULT_DEADLINE = default_deadline(DEFAULT_TIMEOUT)
_DURABILITIES = get_args(Durability)
# The recorded settings' fields, whose validators are the one rule of each.
_FIELDS = attrs.fields_dict(SessionSettings)


def _seconds(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    del instance
    if value is not None or attribute.name != "deadline":
        positive_seconds(attribute.name, value)


def _deadline_for(timeout: Any) -> Any:
    """Three read timeouts, or ``timeout`` itself when it is no number of seconds (its own
    validator then names it)."""
    try:
        return default_deadline(timeout)
    except UsageError:
        return None


def _text(name: str, value: Any) -> None:
    """A ``UsageError`` for text that is not UTF-8 (bytes an argument could not be decoded
    from, kept as lone surrogates): the log, which is JSON in UTF-8, could not hold it."""
    for text in _texts(value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"{name} is not valid UTF-8 text: {value!r}") from None


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif value is None or isinstance(value, int | float):  # most values: no text, no lookup
        return
    elif isinstance(value, Path):
        yield str(value)
    elif attrs.has(type(value)):
        yield from _texts(attrs.asdict(value, recurse=False))
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _texts(item)


def _path(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    del instance
    _text(attribute.name, value)


@attrs.frozen(kw_only=True)
class AgentSettings:
    """The agent's settings that are not the session's: they may differ between two processes
    running the same session, so they are not logged."""

    home: Path = attrs.field(converter=lambda p: Path(p).expanduser(), validator=_path)
    durability: Durability = attrs.field(default="durable", validator=one_of(_DURABILITIES))
    # Read timeout of a model call, and its total deadline (not given: three read timeouts;
    # None: the adapter's default, which is the same).
    timeout: float = attrs.field(default=DEFAULT_TIMEOUT, validator=_seconds)
    deadline: float | None = attrs.field(
        default=attrs.Factory(lambda self: _deadline_for(self.timeout), takes_self=True),
        validator=_seconds)
    delegation_max_iterations: int = attrs.field(default=DELEGATION_MAX_ITERATIONS,
                                                 validator=whole(1))
    # The session to continue (None: a new one), and the session that delegated to this one.
    session_id: str | None = None
    parent_session_id: str | None = None
    # A tool result longer than this is cut to a preview; the whole text is kept in a file.
    max_tool_result_chars: int = attrs.field(default=MAX_RESULT_CHARS, validator=whole(1))
    # The working directory whose context files the prompt carries (None: the process's).
    cwd: Path | None = attrs.field(default=None, validator=_path,
                                   converter=attrs.converters.optional(
                                       lambda p: Path(p).expanduser()))
    # Checkpoint the built-in tools' working tree before a turn first changes it (rules 7).
    checkpoints: bool = True


def check_session_values(values: Mapping[str, Any]) -> None:
    """A ``UsageError`` naming the first bad value meant for ``SessionSettings``: checked at the
    edge, before the settings are built, so that a session that could never be resumed is
    never started. Each field's own rule is its validator (``stages.log.setting_checks``),
    called here on the values given; this adds what the log needs of every text (UTF-8) and
    what an endpoint needs (a name, a reachable URL)."""
    _check_texts_and_endpoints(values)
    for name, value in values.items():
        field = _FIELDS.get(name)
        if field is not None and field.validator is not None:
            field.validator(None, field, value)


def _check_texts_and_endpoints(values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        _text(name, value)
    for name in ("model", "provider"):
        if name in values and (not isinstance(values[name], str) or not values[name].strip()):
            raise UsageError(f"{name} must be a name, got {values[name]!r}")
    for entry in (values.get("cheap_model"), *values.get("fallback_providers", ())):
        if entry is not None:
            check_base_url(entry.base_url)
    check_base_url(values.get("base_url"))


def check_base_url(url: Any) -> None:
    """A ``UsageError`` for an endpoint no adapter could reach (None: the provider's own)."""
    if url is not None and not (isinstance(url, str) and _reachable(url)):
        shown = endpoint_label(url) if isinstance(url, str) else url
        raise UsageError(f"base_url must be an http:// or https:// URL with a host, "
                         f"got {shown!r}")


def _reachable(url: str) -> bool:
    try:
        parts = urlsplit(url)
        # Reading the port raises ValueError when it is not a number.
        return parts.scheme in ("http", "https") and bool(parts.hostname) \
            and (parts.port is None or parts.port > 0)
    except ValueError:
        return False


def checked(settings: SessionSettings) -> SessionSettings:
    """``settings`` after :func:`check_session_values` found nothing wrong in them (their
    fields' validators ran when they were built)."""
    _check_texts_and_endpoints(attrs.asdict(settings, recurse=False))
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


# What a new session gets for a setting nobody gave (config.toml sets none of these).
_DEFAULTS: dict[str, Any] = {
    "max_turns": 500, "stream": True, "max_retries": 3, "retry_base_delay": 2.0,
    "rate_limit_cooldown": 60.0, "billing_cooldown": 3600.0, "prompt_caching": True,
    "cache_ttl": "5m", "platform": "cli", "system_message_mode": "append", "load_context": True,
    "credential_strategy": "round_robin"}
# A resumed session keeps its recorded settings but these: the endpoint is resolved on its
# own, the rules are this code's, and the refresh hook and memory provider are this process's.
_NOT_KEPT = frozenset({"model", "provider", "base_url", "api_mode", "api_mode_reason", "rules",
                       "credential_refresh", "memory_provider"})
_SETTINGS_EVENTS = (SessionStarted, SessionResumed, SessionForked)
_SETTINGS_KINDS = frozenset(event.kind for event in _SETTINGS_EVENTS)


def configure(
    model: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
    provider: str | None = None, api_mode: str | None = None, max_turns: int | None = None,
    max_tokens: int | None = None, context_length: int | None = None,
    stream: bool | None = None, identity: str | None = None, tool_choice: str | None = None,
    session_id: str | None = None, home: str | Path | None = None,
    durability: Durability = "durable", credentials: str | Sequence[str] = (),
    credential_strategy: str | None = None, credential_refresh: Refresh | None = None,
    fallback_providers: Sequence[Mapping[str, str] | ProviderEntry] | None = None,
    max_retries: int | None = None, retry_base_delay: float | None = None,
    rate_limit_cooldown: float | None = None, billing_cooldown: float | None = None,
    prompt_caching: bool | None = None, cache_ttl: str | None = None,
    timeout: float | None = None, deadline: float | None = None,
    delegation_max_iterations: int = DELEGATION_MAX_ITERATIONS,
    parent_session_id: str | None = None, client: ModelClient | None = None,
    tool_runner: ToolRunner | None = None, clock: Clock | None = None,
    cheap_model: Mapping[str, str] | ProviderEntry | None = None,
    max_tool_result_chars: int = MAX_RESULT_CHARS,
    ids: IdSource | None = None, platform: str | None = None,
    system_message_mode: str | None = None, load_context: bool | None = None,
    cwd: str | Path | None = None,
    memory_provider: MemoryProvider | None = None, compression: bool | None = None,
    preflight_threshold: float | None = None, between_turns_threshold: float | None = None,
    protect_last_n: int | None = None, summary_model: str | None = None,
    context_engine: str | None = None, reasoning: str | int | None = None,
    checkpoints: bool = True,
    sandbox: str | None = None, network: bool | None = None,
    allow_unconfined: bool | None = None, env_exclude: Sequence[str] | None = None,
    env_keep: Sequence[str] | None = None, record_tokens: bool | None = None,
    tokenizer: str | None = None,
    output_retries: int | None = None, output_mode: str | None = None,
) -> Configured:
    """The keyword arguments of ``Agent(...)``: for a new session, arguments first, then the
    environment, then ``<home>/config.toml``, then the defaults (``max_turns=500``,
    ``max_retries=3``, ``stream=True``, ...); a resumed session (``session_id``) keeps the
    settings it recorded last, each replaced only by an argument (a ``None`` argument is not
    given), and takes its keys from the environment. Every value is checked before anything
    is started or logged; a bad one is a ``UsageError`` naming it."""
    root = Path(home).expanduser() if home is not None else cfg.home()
    file = cfg.load_file(root)
    section = file.get("model", {})
    read_timeout = _first(timeout, section.get("timeout"), DEFAULT_TIMEOUT)
    agent_settings = AgentSettings(
        home=root, durability=durability, delegation_max_iterations=delegation_max_iterations,
        timeout=read_timeout,
        deadline=_first(deadline, section.get("deadline"), _deadline_for(read_timeout)),
        session_id=session_id, parent_session_id=parent_session_id,
        max_tool_result_chars=max_tool_result_chars, cwd=cwd, checkpoints=checkpoints)
    given = {name: value for name, value in {
        "max_turns": max_turns, "max_tokens": max_tokens, "context_length": context_length,
        "stream": stream, "identity": identity, "tool_choice": tool_choice,
        "record_tokens": record_tokens, "tokenizer": tokenizer,
        "max_retries": max_retries, "retry_base_delay": retry_base_delay,
        "rate_limit_cooldown": rate_limit_cooldown, "billing_cooldown": billing_cooldown,
        "prompt_caching": prompt_caching, "cache_ttl": cache_ttl, "platform": platform,
        "system_message_mode": system_message_mode, "load_context": load_context,
        "credentials": cfg.credential_labels(credentials) or None,
        "credential_strategy": credential_strategy,
        "fallback_providers": None if fallback_providers is None
        else tuple(cfg.provider_entry(f) for f in fallback_providers),
        "cheap_model": None if cheap_model is None else cfg.provider_entry(cheap_model),
        **context_values({}, compression=compression, preflight_threshold=preflight_threshold,
                         between_turns_threshold=between_turns_threshold,
                         protect_last_n=protect_last_n, summary_model=summary_model,
                         context_engine=context_engine),
        **sandbox_values({}, sandbox=sandbox, network=network,
                         allow_unconfined=allow_unconfined, env_exclude=env_exclude,
                         env_keep=env_keep),
        **output_values({}, output_retries=output_retries, output_mode=output_mode),
    }.items() if value is not None}
    if reasoning is not None:  # an effort replaces a recorded budget, and the other way round
        given.update({"reasoning_effort": None, "reasoning_budget": None,
                      **parse_setting(reasoning)})
    from_file = _file_values(file)
    recorded = _recorded(root, session_id)
    values: dict[str, Any] = (
        {**_DEFAULTS, **from_file, **given} if recorded is None
        else {**{k: v for k, v in attrs.asdict(recorded, recurse=False).items()
                 if k not in _NOT_KEPT}, **given})
    values.update(credential_refresh=credential_refresh is not None,
                  memory_provider=None if memory_provider is None else memory_provider.name)
    check_session_values(values)
    if values.get("record_tokens") and values.get("tokenizer"):
        # Loaded now (and kept for the calls): a name that loads nothing is a UsageError
        # before the session starts, not a prompt left untokenised on every call.
        from effects.providers.named_tokenizer import load_tokenizer
        load_tokenizer(values["tokenizer"])
    endpoints: dict[str, Callable[[], str]] = {}
    if client is not None:
        resolved = _client_endpoint(recorded, model, base_url, api_key, provider)
    else:
        resolved = _resolve(_Asked(model, base_url, api_key, provider), file, root,
                            endpoints, recorded, pooled=bool(values["credentials"]))
        if resolved.provider == LOCAL and values.get("max_tokens") is None:
            values["max_tokens"] = LOCAL_MAX_TOKENS
    settings = _session_settings(
        resolved, api_mode or (section.get("api_mode") if recorded is None else None), values)
    if recorded is not None and api_mode is None and _same_endpoint(settings, recorded):
        settings = attrs.evolve(settings, api_mode=recorded.api_mode,
                                api_mode_reason=recorded.api_mode_reason)
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
                           window_probe=window_probe(resolved.api_key))
    return Configured(settings, agent_settings, effects, router.secrets)


def _file_values(file: Mapping[str, Any]) -> dict[str, Any]:
    """What config.toml sets for a new session: the key pool, the fallback chain, the context
    and reasoning settings (checked even when a resumed session does not use them)."""
    section = file.get("model", {})
    context = context_values(file.get("context", {}), compression=None,
                             preflight_threshold=None, between_turns_threshold=None,
                             protect_last_n=None, summary_model=None, context_engine=None)
    values = {"credentials": cfg.credential_labels(section.get("credentials")),
              "credential_strategy": section.get("credential_strategy"),
              "fallback_providers": tuple(cfg.provider_entry(f)
                                          for f in file.get("fallback_providers", ())),
              "context_length": file.get("context", {}).get("context_length"),
              "record_tokens": section.get("record_tokens"),
              "tokenizer": file.get("tokens", {}).get("tokenizer"),
              **context, **parse_setting(section.get("reasoning")),
              **sandbox_values(file.get("sandbox", {})),
              **output_values(file.get("output", {}))}
    return {name: value for name, value in values.items() if value is not None}


def _recorded(root: Path, session_id: str | None) -> SessionSettings | None:
    """The settings a logged session goes on with (those of the newest session of its chain,
    after a compression), or None for a new session."""
    sessions = root / "sessions"
    if session_id is None or not session_path(sessions, session_id).exists():
        return None  # an unknown session is refused when the agent opens it
    last = None
    for envelope in read_envelopes(session_path(sessions, lineage.newest(sessions, session_id))):
        if envelope.kind in _SETTINGS_KINDS:
            last = envelope
    if last is None:
        return None
    event = from_payload(last.kind, last.schema_version, last.payload)
    assert isinstance(event, _SETTINGS_EVENTS)
    return event.settings


def _same_endpoint(settings: SessionSettings, recorded: SessionSettings) -> bool:
    """The same provider, model and endpoint (the embedded model's port changes each run)."""
    return (settings.provider, settings.model) == (recorded.provider, recorded.model) \
        and (settings.provider == LOCAL or settings.base_url == recorded.base_url)


def _client_endpoint(recorded: SessionSettings | None, model: str | None,
                     base_url: str | None, api_key: str | None,
                     provider: str | None) -> cfg.ProviderConfig:
    """The names a caller's own client is recorded under: the arguments, else the resumed
    session's, else placeholders."""
    if recorded is None:
        return cfg.ProviderConfig(provider=provider or "custom", model=model or "scripted",
                                  base_url=base_url or "", api_key=api_key or "")
    return cfg.ProviderConfig(provider=provider or recorded.provider,
                              model=model or recorded.model,
                              base_url=base_url or recorded.base_url or "",
                              api_key=api_key or "")


def _session_settings(resolved: cfg.ProviderConfig, api_mode: str | None,
                      values: dict[str, Any]) -> SessionSettings:
    """The logged settings: the endpoint without credentials, the API mode resolved. The
    other values were checked before the endpoint was resolved; each field's validator runs
    again as the settings are built."""
    check_session_values({"model": resolved.model, "provider": resolved.provider,
                          "base_url": resolved.base_url or None})
    bare_url = split_userinfo(resolved.base_url or None)[0]
    mode = resolve_api_mode(explicit=api_mode, provider=resolved.provider, base_url=bare_url,
                            model=resolved.model)
    return SessionSettings(model=resolved.model, provider=resolved.provider,
                           base_url=bare_url, api_mode=mode.mode,
                           api_mode_reason=mode.reason, **values)


@attrs.frozen
class _Asked:
    """The endpoint as the caller named it (None: not named)."""

    model: str | None
    base_url: str | None
    api_key: str | None
    provider: str | None


def _chosen(asked: _Asked, file: dict, recorded: SessionSettings | None, *, pooled: bool
            ) -> cfg.ProviderConfig | ProviderNotConfiguredError | None:
    """The endpoint a resumed session or the configuration names; else why nothing was
    named (the embedded model stands in), or None when the embedded model was named."""
    named = attrs.asdict(asked)
    try:
        resolved = (cfg.resolve_provider(**named, file=file, pooled=pooled) if recorded is None
                    else cfg.resume_provider(recorded, **named, file=file, pooled=pooled))
    except ProviderNotConfiguredError as missing:
        return missing
    return None if resolved.provider == LOCAL and not resolved.base_url else resolved


def _resolve(asked: _Asked, file: dict, root: Path, endpoints: dict[str, Callable[[], str]],
             recorded: SessionSettings | None, *, pooled: bool) -> cfg.ProviderConfig:
    """The endpoint: a resumed session's own, else the configured one, else (nothing named
    at all) the embedded local model, whose URL is a function in ``endpoints`` (the server
    may be restarted)."""
    chosen = _chosen(asked, file, recorded, pooled=pooled)
    if isinstance(chosen, cfg.ProviderConfig):
        return chosen
    return _local(root, endpoints, chosen, asked.model if chosen is None else None)


def runs_embedded(model: str | None = None, *, base_url: str | None = None,
                  provider: str | None = None, home: str | Path | None = None,
                  session_id: str | None = None) -> bool:
    """Whether ``configure`` with these arguments would choose the embedded local model; it
    starts nothing (the CLI decides what to offer that model before the agent opens)."""
    root = Path(home).expanduser() if home is not None else cfg.home()
    file = cfg.load_file(root)
    chosen = _chosen(_Asked(model, base_url, None, provider), file,
                     _recorded(root, session_id),
                     pooled=bool(_file_values(file).get("credentials")))
    return not isinstance(chosen, cfg.ProviderConfig)


def _local(root: Path, endpoints: dict[str, Callable[[], str]],
           missing: ProviderNotConfiguredError | None, model: str | None) -> cfg.ProviderConfig:
    local_model, endpoints[LOCAL] = local_endpoint(root, missing)
    if model is not None and model != local_model:
        raise UsageError(f"the embedded local model is {local_model!r}, not {model!r} "
                         "([local] in config.toml chooses another GGUF file)")
    return cfg.ProviderConfig(provider=LOCAL, model=local_model, base_url=endpoints[LOCAL](),
                              api_key=cfg.KEYLESS)
