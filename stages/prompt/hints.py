"""Hints stage: context files of the subdirectories the tool calls reach (rules 3).

Before a batch of tool calls runs, ``dirs_to_read`` names the directories inside the working
tree that the calls' arguments reach (path arguments, a shell command's path tokens) and that
were never checked this session; an effect checks them (``HintsRead``: the first of
``AGENTS.md``, ``agents.md``, ``CLAUDE.md``, ``claude.md``, ``.cursorrules`` per directory).
``decide_hints`` then attaches each file found to the first call that reached its directory: it
is appended to that call's result, not to the system prompt, so the prompt stays cached. The
checked set is folded from the log, so each directory is read once a session, across resumes.
"""

from __future__ import annotations

import json
import posixpath

from stages.decision import NOTHING, Decision
from stages.log.events import ContextNotice, Event, HintAttached, SessionSettings
from stages.log.messages import ToolCall
from stages.log.state import State
from stages.prompt.context_files import MAX_HINT_DIRS, candidate_paths, hint_text, reached_dirs


def _running(state: State) -> list[ToolCall]:
    """The calls planned to run and not yet answered."""
    if state.turn is None:
        return []
    planned = set(state.turn.planned)
    return [c for c in state.turn.pending if c.id in planned]


def _arguments(call: ToolCall) -> dict:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _reached(call: ToolCall, cwd: str, seen: frozenset[str]) -> list[str]:
    return reached_dirs(candidate_paths(_arguments(call)), cwd, seen)


def dirs_to_read(state: State, config: SessionSettings) -> tuple[str, ...]:
    """The directories the calls about to run reach for the first time this session."""
    inputs = state.prompt_inputs
    if (not config.rule_set.subdirectory_hints or not config.load_context or inputs is None
            or inputs.cwd is None):
        return ()
    found: list[str] = []
    for call in _running(state):
        for directory in _reached(call, inputs.cwd, state.hint_dirs):
            if directory not in found:
                found.append(directory)
    return tuple(found[:MAX_HINT_DIRS])


def decide_hints(state: State, *, config: SessionSettings) -> Decision:
    """Attach the files just read to the calls that reached their directories."""
    turn, inputs = state.turn, state.prompt_inputs
    if (not config.rule_set.subdirectory_hints or turn is None or not turn.hints_read
            or inputs is None or inputs.cwd is None):
        return NOTHING
    by_call: dict[str, list[str]] = {}
    notices: list[Event] = []
    calls = _running(state)
    for name, raw in turn.hints_read:
        directory = posixpath.join(inputs.cwd, posixpath.dirname(name))
        # The first call whose path lies in (or under) the directory gets its file.
        owner = next((c for c in calls if directory in _reached(c, inputs.cwd, frozenset())),
                     calls[0] if calls else None)
        if owner is None:
            continue
        text, findings = hint_text(name, raw, wide=config.rule_set.wide_injection_scan)
        if findings:
            notices.append(ContextNotice(source="hint", name=name,
                                         detail="blocked: " + ", ".join(findings)))
        by_call.setdefault(owner.id, []).append(text)
    attached = [HintAttached(call_id=call_id, text="\n\n".join(texts))
                for call_id, texts in by_call.items()]
    return Decision(events=(*notices, *attached))
