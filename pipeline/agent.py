"""The public entry point: ``Agent``.

    agent = Agent(model="gpt-4o-mini", tools=[get_weather])
    agent.chat("What's the weather in Oslo?")                  # -> str
    agent.run_conversation("And tomorrow?")                    # -> dict (see TurnResult keys)

Each agent owns one session (created on first use, or resumed with ``session_id=``) whose
event log lives under ``$MIBYAN_HOME/sessions``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from effects.clock import RandomIds, SystemClock
from effects.codec import from_payload
from effects.eventlog import Durability, SessionLog, read_envelopes, session_path
from effects.protocols import Clock, DeltaSink, IdSource, ModelClient
from effects.tool_runner import ThreadPoolToolRunner, ToolRunner
from pipeline import config as cfg
from pipeline.journal import LiveJournal
from pipeline.providers import (
    LOCAL,
    LOCAL_MAX_TOKENS,
    ProviderRouter,
    local_endpoint,
    pooled_keys,
)
from pipeline.result import turn_result
from pipeline.runner import Effects, SessionRunner
from pipeline.tools import Tool, ToolRegistry
from stages.api_mode import resolve_api_mode
from stages.budget import DELEGATION_MAX_ITERATIONS, child_budget
from stages.errors import ProviderNotConfiguredError, UsageError
from stages.events import Event, ProviderEntry, SessionSettings
from stages.fold import fold
from stages.messages import from_openai


class Agent:
    def __init__(
        self, model: str | None = None, *, tools: Iterable[Tool | Callable[..., Any]] = (),
        base_url: str | None = None, api_key: str | None = None, provider: str | None = None,
        api_mode: str | None = None, max_turns: int = 500, max_tokens: int | None = None,
        context_length: int | None = None, stream: bool = True, identity: str | None = None,
        tool_choice: str | None = None, session_id: str | None = None,
        home: str | Path | None = None, durability: Durability = "durable",
        credentials: Sequence[str] = (), credential_strategy: str = "round_robin",
        credential_refresh: Callable[[str], str | None] | None = None,
        fallback_providers: Sequence[Mapping[str, str] | ProviderEntry] | None = None,
        max_retries: int = 3, retry_base_delay: float = 2.0, rate_limit_cooldown: float = 60.0,
        billing_cooldown: float = 3600.0, prompt_caching: bool = True,
        cache_ttl: str = "5m", timeout: float = 600.0,
        delegation_max_iterations: int = DELEGATION_MAX_ITERATIONS,
        parent_session_id: str | None = None, client: ModelClient | None = None,
        tool_runner: ToolRunner | None = None, clock: Clock | None = None,
        ids: IdSource | None = None, event_listener: Callable[[Event], None] | None = None,
    ) -> None:
        if max_turns < 1:
            raise UsageError(f"max_turns must be at least 1, got {max_turns}")
        self.home = Path(home).expanduser() if home is not None else cfg.home()
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        file = cfg.load_file(self.home)
        default_key = api_key
        endpoints: dict[str, Callable[[], str]] = {}
        if client is None:
            try:
                resolved = cfg.resolve_provider(model=model, base_url=base_url, api_key=api_key,
                                                provider=provider, file=file)
            except ProviderNotConfiguredError as missing:
                local_model, endpoints[LOCAL] = local_endpoint(self.home, missing)
                resolved = cfg.ProviderConfig(provider=LOCAL, model=local_model,
                                              base_url=endpoints[LOCAL](), api_key=cfg.KEYLESS)
                max_tokens = max_tokens or LOCAL_MAX_TOKENS
            model, provider, base_url = resolved.model, resolved.provider, resolved.base_url
            default_key = resolved.api_key
        section = file.get("model", {})
        mode = resolve_api_mode(explicit=api_mode or section.get("api_mode"), provider=provider,
                                base_url=base_url, model=model)
        if fallback_providers is None:
            fallback_providers = file.get("fallback_providers", ())
        self.settings = SessionSettings(
            model=model or "scripted", provider=provider or "custom", base_url=base_url,
            api_mode=mode.mode, api_mode_reason=mode.reason, max_turns=max_turns,
            max_tokens=max_tokens, context_length=context_length, stream=stream,
            identity=identity, tool_choice=tool_choice,
            credentials=tuple(credentials or section.get("credentials", ())),
            credential_strategy=credential_strategy,
            credential_refresh=credential_refresh is not None,
            rate_limit_cooldown=rate_limit_cooldown, billing_cooldown=billing_cooldown,
            fallback_providers=tuple(cfg.provider_entry(f) for f in fallback_providers),
            max_retries=max_retries, retry_base_delay=retry_base_delay,
            prompt_caching=prompt_caching, cache_ttl=cache_ttl)
        refresh = None
        self._secrets: tuple[str, ...] = (default_key,) if default_key else ()
        if client is None:
            router = ProviderRouter(default_key=default_key or cfg.KEYLESS,
                                    keys=pooled_keys(self.settings), timeout=timeout,
                                    refresh_hook=credential_refresh, endpoints=endpoints)
            client, refresh, self._secrets = router, router.refresh, router.secrets
        self.durability = durability
        self.delegation_max_iterations = delegation_max_iterations
        self.parent_session_id = parent_session_id
        self._requested_session = session_id
        self._interrupt = threading.Event()
        self._effects = Effects(
            clock=clock or SystemClock(), ids=ids or RandomIds(), model=client, refresh=refresh,
            tools=tool_runner or ThreadPoolToolRunner(self.registry, interrupt=self._interrupt))
        self._listener = event_listener
        self._runner: SessionRunner | None = None
        self._log: SessionLog | None = None
        self._lock = threading.Lock()

    # --- session ----------------------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        if self._runner is not None:
            return self._runner.state.session_id
        return self._requested_session

    def _open(self) -> SessionRunner:
        if self._runner is not None:
            return self._runner
        root = self.home / "sessions"
        session_id = self._requested_session or self._effects.ids.session_id()
        exists = session_path(root, session_id).exists()
        if self._requested_session is not None and not exists:
            raise UsageError(f"no session {session_id!r} under {root}")
        self._log = SessionLog.open(root, session_id, durability=self.durability)
        journal = LiveJournal(self._log, self._effects.clock, self._secrets)
        if exists:
            state = fold(from_payload(e.kind, e.schema_version, e.payload)
                         for e in read_envelopes(self._log.path))
            runner = SessionRunner(journal, self._effects, state=state, interrupt=self._interrupt,
                                   listener=self._listener)
            runner.resume(self.settings)
        else:
            runner = SessionRunner(journal, self._effects, interrupt=self._interrupt,
                                   listener=self._listener)
            runner.start(self.settings, session_id=session_id,
                         parent_session_id=self.parent_session_id)
        runner.declare_tools(self.registry.specs)
        self._runner = runner
        return runner

    # --- turns ------------------------------------------------------------------------------
    def run_conversation(self, user_message: str, system_message: str | None = None,
                         conversation_history: Sequence[Mapping[str, Any]] | None = None,
                         task_id: str | None = None,
                         stream_callback: DeltaSink | None = None) -> dict[str, Any]:
        """Run one user turn to its end and describe it (see ``pipeline.result``)."""
        history = None
        if conversation_history is not None:
            history = tuple(from_openai(dict(m)) for m in conversation_history)
        with self._lock:
            runner = self._open()
            try:
                state = runner.run_turn(user_message, system_message=system_message,
                                        history=history, task_id=task_id,
                                        on_delta=stream_callback)
            finally:
                # An interrupt that came after this turn's last step must not stop the next one.
                self._interrupt.clear()
        return turn_result(state)

    def chat(self, message: str, stream_callback: DeltaSink | None = None) -> str:
        return self.run_conversation(message, stream_callback=stream_callback)["final_response"] or ""

    def interrupt(self) -> None:
        """Stop the running turn now (a model call's response is closed, a backoff is cut
        short, tools not yet started are skipped); safe from any thread. Between turns it
        stops the next turn at its first step."""
        self._interrupt.set()

    def child(self, *, max_turns: int | None = None, tools: Iterable[Any] | None = None,
              **overrides: Any) -> Agent:
        """A subagent on the same provider with its own session and a capped budget."""
        options: dict[str, Any] = dict(
            model=self.settings.model, provider=self.settings.provider,
            base_url=self.settings.base_url, home=self.home, durability=self.durability,
            client=self._effects.model, clock=self._effects.clock, ids=self._effects.ids,
            delegation_max_iterations=self.delegation_max_iterations,
            tools=self.registry if tools is None else tools)
        options.update(overrides)
        options["max_turns"] = child_budget(
            max_turns, delegation_max_iterations=self.delegation_max_iterations)
        options["parent_session_id"] = self._open().state.session_id
        return Agent(**options)

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
            shutdown = getattr(self._effects.tools, "shutdown", None)
            if shutdown is not None:
                shutdown()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
