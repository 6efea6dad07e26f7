"""The ``memory`` tool: the model adds, replaces and removes entries of the built-in memory
(``MEMORY.md``, its own notes; ``USER.md``, what it knows about the user).

    agent = Agent(..., tools=[*my_tools, memory_tool(home)])

Writes are durable at once (atomic, under a lock) and scanned for injection first; the prompt
carries the snapshot taken when the session started, so a write shows in the prompt from the
next session on (the prompt stays byte-stable for the provider's cache). Refusals (over the
limit, a duplicate, an ambiguous match, a hostile entry) are results the model reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from effects.memory_store import MemoryStore, MemoryWriteRefused
from pipeline.tools import Tool
from stages.prompt.memory import ENTRY_SEPARATOR

__all__ = ["memory_tool"]

NEXT_SESSION = "saved; it will be in your memory block from the next session on"


def memory_tool(home: str | Path) -> Tool:
    store = MemoryStore(Path(home).expanduser())

    def memory(action: Literal["add", "replace", "remove", "read"],
               target: Literal["memory", "user"] = "memory", content: str = "",
               old_text: str = "") -> dict[str, object]:
        """Keep durable notes across sessions: facts about the project and lessons learned
        (target "memory"), or about the user and their preferences (target "user").

        Args:
            action: "add" a new entry, "replace" the entry containing old_text with content,
                "remove" the entry containing old_text, or "read" the entries.
            target: "memory" for your notes, "user" for the user profile.
            content: The entry text for add and replace; short and self-contained.
            old_text: A unique part of the entry to replace or remove.
        """
        try:
            if action == "add":
                entries = store.add(target, content)
            elif action == "replace":
                entries = store.replace(target, old_text, content)
            elif action == "remove":
                entries = store.remove(target, old_text)
            else:
                entries = store.entries(target)
        except MemoryWriteRefused as refused:
            return {"error": str(refused)}
        used = len(ENTRY_SEPARATOR.join(entries))
        result: dict[str, object] = {"target": target, "entries": entries,
                                     "usage": f"{used}/{store.limits[target]} chars"}
        if action != "read":
            result["note"] = NEXT_SESSION
        return result

    return Tool.from_function(memory)
