"""``mibyan chat``: the interactive session on a terminal, plain line-by-line when stdin is
not one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.chat.session import ChatOptions, ChatSession

__all__ = ["chat", "options_from"]


def options_from(args: argparse.Namespace) -> ChatOptions:
    return ChatOptions(
        home=args.home, workdir=Path(args.workdir or Path.cwd()), model=args.model,
        base_url=args.base_url, provider=args.provider, api_mode=args.api_mode,
        session_id=args.resume, system=args.system, max_turns=args.max_turns,
        max_tokens=args.max_tokens, toolsets=args.toolsets, no_tools=args.no_tools)


def chat(args: argparse.Namespace) -> int:
    from pipeline.providers import LOCAL, LOCAL_NOTICE
    options = options_from(args)
    _check_resume(options)
    if args.plain or not sys.stdin.isatty():
        from pipeline.chat.display import PlainDisplay
        from pipeline.chat.piped import piped
        session = ChatSession(options, PlainDisplay())
        if session.agent.settings.provider == LOCAL:
            print(LOCAL_NOTICE, file=sys.stderr)
        try:
            return piped(session, sys.stdin)
        finally:
            session.close()
    return _interactive(options)


def _check_resume(options: ChatOptions) -> None:
    from effects.eventlog import session_path
    from stages.errors import UsageError
    root = options.state_home / "sessions"
    if options.session_id and not session_path(root, options.session_id).exists():
        raise UsageError(f"no session {options.session_id!r} under {root}")


def _interactive(options: ChatOptions) -> int:
    from rich.console import Console

    from pipeline.chat.app import Terminal, interactive
    from pipeline.chat.render import RichDisplay
    from pipeline.providers import LOCAL, LOCAL_NOTICE
    console = Console(highlight=False)
    terminal = Terminal(options.state_home, console)
    session = ChatSession(options, RichDisplay(console), asker=terminal.ask)
    try:
        settings = session.agent.settings
        if settings.provider == LOCAL:
            session.display.notice(LOCAL_NOTICE.removeprefix("mibyan: "), "dim")
        where = f"resuming {options.session_id}" if options.session_id else "new session"
        session.display.notice(f"mibyan chat · {settings.model} ({settings.provider}) · "
                               f"{where} · /help lists the commands", "dim")
        return interactive(session, terminal)
    finally:
        session.close()
