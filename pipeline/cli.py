"""``mibyan``: the command line. Heavy modules (SDKs, DuckDB) are imported by the command that
needs them, so ``mibyan --help`` starts fast."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mibyan", description="An event-sourced LLM agent loop with deterministic replay.")
    parser.add_argument("--home", type=Path, help="state directory (default: $MIBYAN_HOME or "
                        "~/.mibyan)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run one agent turn and print the answer")
    run.add_argument("message", help="the user message")
    run.add_argument("--model", help="model name (else $MIBYAN_MODEL or config.toml)")
    run.add_argument("--base-url", help="provider endpoint (else $OPENAI_BASE_URL)")
    run.add_argument("--provider", help="openai (default), anthropic, or a name of yours")
    run.add_argument("--api-mode", choices=("chat_completions", "codex_responses",
                                            "anthropic_messages"),
                     help="the provider API (else detected from provider and endpoint)")
    run.add_argument("--resume", metavar="SESSION", help="continue this session")
    run.add_argument("--system", help="system prompt for this turn")
    run.add_argument("--max-turns", type=int, default=500, help="model calls per turn (500)")
    run.add_argument("--max-tokens", type=int, help="output cap per model call")
    run.add_argument("--no-stream", action="store_true", help="do not stream the answer")
    run.add_argument("--durability", choices=("durable", "flush"), default="durable",
                     help="fsync the log at turn ends and before tools (durable) or only flush")
    run.add_argument("--no-tools", action="store_true", help="offer the model no tools")

    commands.add_parser("sessions", help="list sessions")
    replay = commands.add_parser("replay", help="re-run a session from its log and compare")
    replay.add_argument("session")
    log = commands.add_parser("log", help="event-log maintenance")
    log_commands = log.add_subparsers(dest="log_command", required=True, metavar="ACTION")
    verify = log_commands.add_parser("verify", help="check a session's sequence and hash chain")
    verify.add_argument("session")
    sql = commands.add_parser("sql", help="query all event logs with DuckDB "
                              "(views: events, sessions)")
    sql.add_argument("query")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from pipeline import commands
    from stages.errors import MibyanError, UsageError
    try:
        return commands.dispatch(args)
    except UsageError as exc:
        print(f"mibyan: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MibyanError as exc:
        print(f"mibyan: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
