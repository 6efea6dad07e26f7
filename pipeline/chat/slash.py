"""The chat's slash commands: one table, one entry per command (name, arguments, one-line help,
handler). ``register`` adds an entry (``/fork`` and ``/export`` plug in this way).

A handler gets the chat it acts on (a :class:`Chat`: the session of
:mod:`pipeline.chat.session` is one) and the text after the command's name; it returns False
to end the chat. A ``MibyanError`` or ``OSError`` it raises is shown, and the chat goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs

from stages.errors import MibyanError

if TYPE_CHECKING:
    from pipeline.agent import Agent
    from pipeline.chat.display import Display
    from pipeline.chat.options import ChatOptions
    from pipeline.insights.prices import PriceTable
    from pipeline.result import TurnResult
    from stages.log.state import State

__all__ = ["COMMANDS", "KEYS_HELP", "Chat", "SlashCommand", "command", "names", "register", "run"]

T = TypeVar("T")


class Chat(Protocol):
    """What a command acts on. The session runs the commands and hands itself in, so the
    commands need not know the session's module (which imports this table)."""

    options: ChatOptions
    display: Display
    agent: Agent
    prices: PriceTable
    last: TurnResult | None  # the last turn run in this chat, if any

    @property
    def session_id(self) -> str | None: ...

    @property
    def home(self) -> Path: ...

    def switch(self, session_id: str | None, model: str | None = None) -> None: ...

    def in_worker(self, job: Callable[[Agent], T]) -> T | None: ...


SESSIONS_SHOWN = 20

Handler = Callable[[Chat, str], "bool | None"]
KEYS_HELP = ("Enter sends; Esc Enter or Ctrl-J adds a line; Ctrl-C interrupts the turn (at an "
             "empty prompt, twice, exits); Ctrl-D exits; // starts a message with /")


@attrs.frozen
class SlashCommand:
    name: str
    help: str
    run: Handler = attrs.field(eq=False)
    args: str = ""

    @property
    def usage(self) -> str:
        return f"/{self.name} {self.args}".rstrip()


COMMANDS: dict[str, SlashCommand] = {}


def register(entry: SlashCommand) -> SlashCommand:
    """Add (or replace) a command of the table."""
    COMMANDS[entry.name] = entry
    return entry


def command(name: str, help: str, args: str = "") -> Callable[[Handler], Handler]:
    def add(handler: Handler) -> Handler:
        register(SlashCommand(name, help, handler, args))
        return handler
    return add


def names() -> list[str]:
    return [f"/{entry.name}" for entry in _listed()]


def _listed() -> list[SlashCommand]:
    """The table's order, /exit last (commands registered later come before it)."""
    return sorted(COMMANDS.values(), key=lambda entry: entry.name == "exit")


def run(session: Chat, line: str) -> bool:
    """Run the slash command ``line``; False when the chat should end."""
    name, _, arg = line.strip()[1:].partition(" ")
    entry = COMMANDS.get(name.lower())
    if entry is None:
        session.display.notice(f"unknown command /{name}; /help lists the commands", "warn")
        return True
    try:
        return entry.run(session, arg.strip()) is not False
    except (MibyanError, OSError) as exc:  # a path the user typed may not be writable
        session.display.notice(f"/{entry.name}: {exc}", "error")
        return True



# --- the commands (in the order /help lists them) --------------------------------------------

@command("help", "list the commands and keys")
def _help(session: Chat, arg: str) -> None:
    session.display.table(("command", "what it does"),
                          [(entry.usage, entry.help) for entry in _listed()])
    session.display.text(KEYS_HELP)


@command("new", "start a new session (from your next message)")
def _new(session: Chat, arg: str) -> None:
    session.switch(None)
    session.display.notice("new session: it starts with your next message")


@command("resume", "continue a session (without an id: list the recent ones)", "[id]")
def _resume(session: Chat, arg: str) -> None:
    if not arg:
        _sessions(session, "")
        session.display.text("/resume ID continues one of them")
        return
    from effects.eventlog.lineage import newest
    from effects.eventlog.store import session_path
    from stages.errors import UsageError
    root = session.home / "sessions"
    if not session_path(root, arg).exists():
        raise UsageError(f"no session {arg!r} under {root}")
    target = newest(root, arg)
    session.switch(target)
    recap = session_recap(root, target)
    note = f" (continued from {arg})" if target != arg else ""
    session.display.notice(f"resumed session {target}{note}: {recap}")


def session_recap(root: Path, session_id: str) -> str:
    """How many messages the session holds, and the last answer's first words."""
    from pipeline.chat.text import shorten
    state = _folded(root, session_id)
    answers = [m.text for m in state.messages if m.role == "assistant" and m.text]
    last = f"; last answer: {shorten(answers[-1], 80)}" if answers else ""
    return f"{len(state.messages)} messages{last}"


def _folded(root: Path, session_id: str) -> State:
    from effects.eventlog.lineage import folded_log
    from effects.eventlog.store import session_path
    return folded_log(session_path(root, session_id))


@command("sessions", "list the recent sessions")
def _sessions(session: Chat, arg: str) -> None:
    from pipeline.insights.query import query
    from pipeline.insights.views import SESSIONS_WITH_LINEAGE
    root = session.home / "sessions"
    if not root.is_dir():
        session.display.text("no sessions yet")
        return
    columns, rows = query(root, f"SELECT session_id, started_at, model, turns, status, "
                                f"continued_in FROM ({SESSIONS_WITH_LINEAGE}) "
                                f"ORDER BY started_at DESC LIMIT {SESSIONS_SHOWN}")
    session.display.table(columns, rows)


@command("model", "show the model, or go on with another", "[name]")
def _model(session: Chat, arg: str) -> None:
    settings = session.agent.settings
    if not arg:
        session.display.text(f"{settings.model} ({settings.provider}, {settings.api_mode})")
        return
    session.switch(session.session_id, model=arg)
    session.display.notice(f"model: {session.agent.settings.model}")


@command("tools", "list the tools the model may call")
def _tools(session: Chat, arg: str) -> None:
    rows = [(t.name, (t.spec.description or "").strip().split("\n")[0])
            for t in session.agent.registry]
    session.display.table(("tool", "what it does"), rows)


@command("compress", "compress the context now (the session goes on in a child)")
def _compress(session: Chat, arg: str) -> None:
    before = session.session_id
    done = session.in_worker(lambda agent: agent.compress())
    session.display.end_turn(None)
    if done:
        session.display.notice(f"compressed: {before} continues in {session.session_id}")
    elif done is False:
        session.display.notice("nothing to compress yet")


ROLLBACK_USAGE = "usage: /rollback [TURN] (TURN: a turn's number; none: the latest checkpoint)"


@command("rollback", "put the working tree back as it was before a turn changed it",
         "[TURN]")
def _rollback(session: Chat, arg: str) -> None:
    from stages.errors import UsageError
    if arg.strip() and not arg.strip().isdigit():
        raise UsageError(ROLLBACK_USAGE)
    turn = int(arg) if arg.strip() else None
    done = session.in_worker(lambda agent: agent.rollback(turn))
    if done is None:
        return
    if done.error is not None:
        session.display.notice(f"nothing rolled back: {done.error}", "error")
        return
    session.display.notice(f"rolled back to before turn {done.turn}: {done.restored} file(s) "
                           f"restored, {done.removed} removed (undo: checkpoint {done.saved})")


@command("usage", "tokens, cache hits and estimated cost of this session")
def _usage(session: Chat, arg: str) -> None:
    from pipeline.chat.text import cost_text, usage_text
    last = session.last
    if last is not None:
        sid, usage, model, provider = (last.session_id, last.session_usage, last.model,
                                       last.provider)
    elif session.session_id is not None:  # resumed or forked: its turns are in its log
        state = _folded(session.home / "sessions", session.session_id)
        if state.settings is None:
            session.display.text("no turn yet in this session")
            return
        sid, usage = session.session_id, state.usage
        model, provider = state.settings.model, state.settings.provider
    else:
        session.display.text("no turn yet in this session")
        return
    session.display.text(f"session {sid}: {usage_text(usage)} · "
                         f"{cost_text(usage, model, provider, session.prices)} · "
                         f"{usage.total_tokens:,} tokens in all")


@command("replay", "replay a session from its log and compare (default: this one)", "[id]")
def _replay(session: Chat, arg: str) -> None:
    from pipeline.shell.replay import replay
    target = arg or session.session_id
    if target is None:
        session.display.text("nothing to replay yet")
        return
    report = replay(session.home / "sessions", target)
    level = "info" if report.identical else "error"
    session.display.notice(f"replay of {target}: {report.describe()}", level)


FORK_USAGE = "usage: /fork [SEQ] [model=NAME] (SEQ: keep the records before it; a number)"


@command("fork", "go on in a fork of this session (its first SEQ records, else all)",
         "[SEQ] [model=NAME]")
def _fork(session: Chat, arg: str) -> None:
    from pipeline.agent import fork_session
    from stages.errors import UsageError
    origin = session.session_id
    if origin is None:
        raise UsageError("nothing to fork yet: this session has no turn")
    at, changes = _fork_arguments(arg)
    settings: dict[str, Any] = dict(changes)
    fork = session.in_worker(lambda agent: fork_session(agent, origin, at=at, **settings))
    if fork is None:
        return
    fork.agent.close()
    session.switch(fork.session_id, model=changes.get("model"))
    if fork.continued is not None:
        session.display.end_turn(None)
    session.display.notice(f"forked {origin}@{fork.origin_seq}: now in {fork.session_id}")


def _fork_arguments(arg: str) -> tuple[int | None, dict[str, str]]:
    """``[SEQ] [model=NAME]``; anything else is refused: a bare word (a session id, a model
    name) would otherwise be taken for what it is not."""
    from stages.errors import UsageError
    words = arg.split()
    at = int(words.pop(0)) if words and words[0].isascii() and words[0].isdecimal() else None
    changes = {}
    if words:
        key, _, model = words.pop(0).partition("=")
        if key != "model" or not model:
            raise UsageError(FORK_USAGE)
        changes["model"] = model
    if words:
        raise UsageError(FORK_USAGE)
    return at, changes


@command("export", "write this session's trajectory (sharegpt, openai, trl) as JSONL",
         "[format] [path]")
def _export(session: Chat, arg: str) -> None:
    from effects.eventlog.lineage import oldest
    from pipeline.export.exporter import export_sessions
    from pipeline.export.select import ExportFilters
    from stages.errors import UsageError
    if session.session_id is None:
        raise UsageError("nothing to export yet: this session has no turn")
    root = session.home / "sessions"
    first = oldest(root, session.session_id)
    fmt, _, path = arg.partition(" ")
    fmt = fmt or "sharegpt"
    # By default into the home, beside the logs it comes from, not into the user's tree (a
    # repository, where it would be committed by the next `git add -A`).
    out = (Path(path.strip()).expanduser() if path.strip()
           else session.home / "exports" / f"{first}.{fmt}.jsonl")
    report = export_sessions(root, out, fmt=fmt, filters=ExportFilters(session_ids=(first,)))
    session.display.notice(report.describe())


@command("memory", "show the built-in memory (MEMORY.md and USER.md)")
def _memory(session: Chat, arg: str) -> None:
    from effects.memory_store import MemoryStore
    store = MemoryStore(session.home)
    for target, title in (("memory", "memory"), ("user", "user profile")):
        entries = store.entries(target)
        session.display.text(f"{title}: " + ("(empty)" if not entries else ""))
        for entry in entries:
            session.display.text(f"  - {entry}")


@command("skills", "list the skills the agent may load")
def _skills(session: Chat, arg: str) -> None:
    from effects.skill_files import scan_skills, skill_roots
    cards = scan_skills(skill_roots(session.home, session.options.workdir))
    if not cards:
        session.display.text("no skills installed (put them under <home>/skills)")
        return
    session.display.table(("skill", "category", "what it is for"),
                          [(c.name, c.category, c.description) for c in cards])


@command("exit", "end the chat (Ctrl-D too)")
def _exit(session: Chat, arg: str) -> bool:
    return False
