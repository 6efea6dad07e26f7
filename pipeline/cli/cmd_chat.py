"""``mibyan chat``: the interactive session on a terminal, plain line-by-line when stdin is
not one."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from pipeline.chat.options import ChatOptions
from pipeline.chat.session import ChatSession
from pipeline.cli.local_profile import offered_toolsets, runs_embedded
from pipeline.cli.resume import check_resume
from pipeline.cli.signals import EXIT_SIGNALLED

__all__ = ["chat", "options_from"]


def options_from(args: argparse.Namespace) -> ChatOptions:
    toolsets = offered_toolsets(args, runs_embedded(args))
    return ChatOptions(
        home=args.home, workdir=Path(args.workdir or Path.cwd()), model=args.model,
        base_url=args.base_url, provider=args.provider, api_mode=args.api_mode,
        session_id=args.resume, system=args.system, max_turns=args.max_turns,
        max_tokens=args.max_tokens, timeout=args.timeout, deadline=args.deadline,
        stream=not args.no_stream, durability=args.durability, toolsets=toolsets or (),
        no_tools=toolsets is None, sandbox=args.sandbox,
        overrides={k: v for k, v in (("record_tokens", args.record_tokens),
                                      ("tokenizer", args.tokenizer)) if v})


def chat(args: argparse.Namespace) -> int:
    check_resume(args.home, args.resume)
    options = options_from(args)
    plain = args.plain or not sys.stdin.isatty()
    session, loop = _plain(options) if plain else _terminal(options)
    try:
        with _terminable(session) as received:
            status = loop()
    finally:
        session.close()
    return EXIT_SIGNALLED + received[0] if received else status


@contextlib.contextmanager
def _terminable(session: ChatSession) -> Iterator[list[int]]:
    """SIGTERM (``timeout``, a service manager) as ``mibyan run`` takes it: the running turn
    is interrupted, ends cleanly with its event and stays resumable, then the chat ends. It
    comes as a Ctrl-C, which every wait of the chat answers so; the signals received are
    yielded."""
    received: list[int] = []

    def handle(signum: int, frame: object) -> None:
        del frame
        received.append(signum)
        session.ended = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def _recap(options: ChatOptions) -> str:
    """Where a resumed session stands (issue 25: the chat showed none on resume)."""
    from effects.eventlog.lineage import newest
    from pipeline.chat.slash import session_recap
    root = options.state_home / "sessions"
    assert options.session_id is not None
    return session_recap(root, newest(root, options.session_id))


def _plain(options: ChatOptions) -> tuple[ChatSession, Callable[[], int]]:
    from pipeline.chat.display import PlainDisplay
    from pipeline.chat.piped import piped
    from pipeline.providers import LOCAL, LOCAL_NOTICE
    session = ChatSession(options, PlainDisplay())
    if session.agent.settings.provider == LOCAL:
        print(LOCAL_NOTICE, file=sys.stderr)
    if options.session_id:
        session.display.notice(f"resuming {options.session_id}: {_recap(options)}")
    return session, lambda: piped(session, sys.stdin)


def _terminal(options: ChatOptions) -> tuple[ChatSession, Callable[[], int]]:
    from rich.console import Console

    from pipeline.chat.render import RichDisplay
    from pipeline.chat.steerline import SteerLine
    from pipeline.chat.terminal import Terminal, interactive
    from pipeline.providers import LOCAL, LOCAL_NOTICE
    console = Console(highlight=False)
    terminal, display = Terminal(options.state_home, console), RichDisplay(console)
    session = ChatSession(options, display, asker=terminal.ask,
                          typing=SteerLine(terminal, display))
    settings = session.agent.settings
    if settings.provider == LOCAL:
        session.display.notice(LOCAL_NOTICE.removeprefix("mibyan: "), "dim")
    where = (f"resuming {options.session_id}: {_recap(options)}" if options.session_id
             else "new session")
    session.display.notice(f"mibyan chat · {settings.model} ({settings.provider}) · "
                           f"{where} · /help lists the commands", "dim")
    return session, lambda: interactive(session, terminal)
