"""The built-in toolset, grouped in toolsets a session enables.

    tools = builtin_tools("~/src/project", toolsets=("files", "terminal", "planning"))
    agent = Agent(model=..., tools=tools)

===========  ==========================================================
toolset      tools
===========  ==========================================================
files        read_file, write_file, patch, search_files
terminal     terminal, process
interactive  clarify (needs ``clarify=`` a callback asking the user)
planning     todo
===========  ==========================================================

Paths are resolved against ``root`` and refused outside it unless ``allow_outside``; the
directories in ``allowed``, and the one where oversized results are kept
(``effects.tools.executor.SPILL_DIR``), may be used too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import attrs

from effects.tools.clarify_todo import Clarifier, ClarifyCallback, TodoList
from effects.tools.executor import SPILL_DIR
from effects.tools.files import FileTools
from effects.tools.sandbox import Probe, SandboxPolicy
from effects.tools.terminal import Terminal
from effects.tools.workspace import Workspace
from pipeline.tools import Tool
from stages.errors import UsageError
from stages.log.messages import Message

__all__ = ["DEFAULT_TOOLSETS", "TOOLSETS", "BuiltinTools", "builtin_tools"]

TOOLSETS: dict[str, tuple[str, ...]] = {
    "files": ("read_file", "write_file", "patch", "search_files"),
    "terminal": ("terminal", "process"),
    "interactive": ("clarify",),
    "planning": ("todo",),
}
DEFAULT_TOOLSETS = ("files", "terminal", "planning")
_READ_ONLY = frozenset({"read_file", "search_files"})


@attrs.frozen
class BuiltinTools:
    """The tools of the enabled toolsets, and the objects behind them (a terminal to close, a
    todo list to restore on resume)."""

    tools: tuple[Tool, ...]
    terminal: Terminal
    todos: TodoList
    # Stopped with the toolset, when the agent closes: the MCP servers of its tools.
    also_close: tuple[Callable[[], None], ...] = ()

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    @property
    def root(self) -> Path:
        """The working tree the tools change (what checkpoints snapshot)."""
        return self.terminal.workspace.root

    def close(self) -> None:
        """Stop the background processes still running (and ``also_close``)."""
        try:
            self.terminal.close()
        finally:
            for stop in self.also_close:
                stop()

    def confine(self, policy: SandboxPolicy) -> Probe:
        """Run the terminal's commands under the session's sandbox policy."""
        return self.terminal.confine(policy)

    def restore(self, messages: Sequence[Message]) -> None:
        """Take up a resumed session's todo list from its history."""
        self.todos.restore(messages)


def builtin_tools(root: str | Path = ".", *, toolsets: Iterable[str] = DEFAULT_TOOLSETS,
                  allow_outside: bool = False, allowed: Iterable[str | Path] = (),
                  clarify: ClarifyCallback | None = None) -> BuiltinTools:
    """The built-in tools of ``toolsets`` working in ``root``."""
    chosen = tuple(dict.fromkeys(toolsets))
    unknown = [name for name in chosen if name not in TOOLSETS]
    if unknown:
        raise UsageError(f"unknown toolset(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(TOOLSETS)}")
    workspace = Workspace(root=Path(root), allowed=(SPILL_DIR, *(Path(p) for p in allowed)),
                          allow_outside=allow_outside)
    files, terminal, todos = FileTools(workspace), Terminal(workspace), TodoList()
    handlers: dict[str, Callable[..., object]] = {
        "read_file": files.read_file, "write_file": files.write_file, "patch": files.patch,
        "search_files": files.search_files, "terminal": terminal.terminal,
        "process": terminal.process, "clarify": Clarifier(clarify).clarify, "todo": todos.todo}
    tools = tuple(Tool.from_function(handlers[name], read_only=name in _READ_ONLY,
                                     interactive=name == "clarify")
                  for toolset in chosen for name in TOOLSETS[toolset])
    return BuiltinTools(tools, terminal, todos)
