"""Plugin hooks: code that watches (or vetoes) what an agent does.

    hooks = Hooks()

    @hooks.on("pre_tool_call")
    def no_network(*, name, arguments, call_id, task_id):
        if name == "terminal" and "curl" in arguments.get("command", ""):
            return "network access is not allowed here"     # blocks the call; the model reads it

    agent = Agent(..., hooks=hooks)

Events and their keyword arguments:

* ``pre_tool_call(name, arguments, call_id, task_id)``: return a non-empty string to block the
  call with that reason (the first blocking hook wins; the others still see the call);
* ``post_tool_call(name, arguments, call_id, task_id, ok, content, error, duration_ms)``;
* ``turn_start(session_id, task_id, user_message)`` and ``turn_end(session_id, result)``;
* ``session_start(session_id, resumed)`` and ``session_end(session_id)``.

Plugins installed as packages register through the entry-point group ``mibyan.plugins``: each
entry point names a function that takes the :class:`Hooks` and registers on it. A hook (or a
plugin's registration) that raises is logged and skipped; the agent goes on. The tool hooks run
inside the tool runner, so what they decide is part of the tool's logged result and a replay
serves it without running them.

The installed plugins are found once per process (scanning every installed distribution's
metadata costs 10 to 30 ms, which every ``Agent()`` paid): a plugin installed while the process
runs registers with the agents made after :func:`refresh_plugins`, or in the next process.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any

from effects.logs import get_logger
from stages.errors import UsageError
from stages.log.tool_specs import ToolInvocation, ToolOutcome

__all__ = ["ENTRY_POINT_GROUP", "HOOK_EVENTS", "Hooks", "default_hooks", "refresh_plugins"]

ENTRY_POINT_GROUP = "mibyan.plugins"
HOOK_EVENTS = ("pre_tool_call", "post_tool_call", "turn_start", "turn_end", "session_start",
               "session_end")
Hook = Callable[..., Any]

log = get_logger(__name__)


@functools.cache
def _discovered(group: str) -> tuple[metadata.EntryPoint, ...]:
    """The entry points of ``group``, found once per process (``refresh_plugins``)."""
    return tuple(metadata.entry_points(group=group))


def refresh_plugins() -> None:
    """Forget the plugins found so far: the next agent (or ``load_plugins``) looks again, and
    finds those installed since."""
    _discovered.cache_clear()


def _arguments(call: ToolInvocation) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Hooks:
    """Registered hooks per event; thread-safe (tool hooks run on the runner's threads)."""

    def __init__(self) -> None:
        self._hooks: dict[str, list[Hook]] = {event: [] for event in HOOK_EVENTS}
        self._lock = threading.Lock()

    def register(self, event: str, hook: Hook) -> Hook:
        if event not in self._hooks:
            raise UsageError(f"unknown hook event {event!r}; expected one of "
                             f"{', '.join(HOOK_EVENTS)}")
        with self._lock:
            self._hooks[event].append(hook)
        return hook

    def on(self, event: str) -> Callable[[Hook], Hook]:
        """Decorator form of :meth:`register`."""
        return functools.partial(self.register, event)

    def fire(self, event: str, **kwargs: Any) -> list[Any]:
        """Call every hook of ``event``; the results of those that returned."""
        if not self._hooks[event]:  # most events of most agents: no lock, no copy
            return []
        with self._lock:
            hooks = list(self._hooks[event])
        results = []
        for hook in hooks:
            try:
                results.append(hook(**kwargs))
            except Exception as exc:
                log.error("hook.failed", hook_event=event, hook=getattr(hook, "__name__", "?"),
                          error=f"{type(exc).__name__}: {exc}", exc_info=True)
        return results

    def __bool__(self) -> bool:
        return any(self._hooks.values())

    # --- the tool runner's side (effects.tools.executor.ToolHooks) ------------------------------
    def before_tool(self, call: ToolInvocation, task_id: str) -> str | None:
        results = self.fire("pre_tool_call", name=call.name, arguments=_arguments(call),
                            call_id=call.call_id, task_id=task_id)
        return next((r for r in results if isinstance(r, str) and r.strip()), None)

    def after_tool(self, call: ToolInvocation, outcome: ToolOutcome, task_id: str) -> None:
        self.fire("post_tool_call", name=call.name, arguments=_arguments(call),
                  call_id=call.call_id, task_id=task_id, ok=outcome.ok, content=outcome.content,
                  error=outcome.error, duration_ms=outcome.duration_ms)

    # --- plugins ------------------------------------------------------------------------------
    def load_plugins(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Let every installed plugin of ``group`` register; the names of those that did."""
        loaded = []
        for entry in _discovered(group):
            try:
                entry.load()(self)
            except Exception as exc:
                log.error("plugin.failed", plugin=entry.name,
                          error=f"{type(exc).__name__}: {exc}", exc_info=True)
                continue
            loaded.append(entry.name)
        return loaded


def default_hooks() -> Hooks:
    """Hooks with the installed plugins registered."""
    hooks = Hooks()
    hooks.load_plugins()
    return hooks
