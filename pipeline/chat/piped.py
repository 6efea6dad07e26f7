"""The chat without a terminal: each line of stdin is a message (or a slash command), answers
go to stdout as plain text, tool lines, notices and usage to stderr; nobody can answer
approvals, so dangerous commands are denied. It scripts well::

    printf 'what is 2+2?\\n/usage\\n' | mibyan chat
"""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.chat.session import ChatSession

__all__ = ["piped"]

EXIT_OK, EXIT_FAILED = 0, 1


def piped(session: ChatSession, lines: Iterable[str]) -> int:
    """Run each line; 1 when a turn failed, else 0."""
    for line in lines:
        try:
            if not session.handle(line.rstrip("\n")) or session.ended:
                break
        except KeyboardInterrupt:
            break
    return EXIT_FAILED if session.failed_turns else EXIT_OK
