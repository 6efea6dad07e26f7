"""What each ``mibyan`` command does (the parser lives in main.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import attrs

from pipeline import config as cfg
from pipeline.printable import printable
from stages.errors import UsageError

EXIT_OK, EXIT_FAILED = 0, 1


def _root(args: argparse.Namespace) -> Path:
    return (args.home or cfg.home()) / "sessions"


def _unshown(answer: str, streamed: str) -> str:
    """What of the answer the stream did not show: the rest of it (all of it without a
    stream; nothing when a cut reply's continuations were all streamed), or the whole answer
    on a line of its own when the stream showed something else (a reply later discarded)."""
    if answer.startswith(streamed):
        return answer[len(streamed):]
    return f"\n{answer}" if answer else ""


def _ask_approval(request: Any) -> str:
    """The approval prompt on the terminal (stdin is one): once / session / always / deny."""
    print(printable(f"mibyan: the model wants to run {request.command!r}: "
                    f"{request.description}."), file=sys.stderr)
    answer = input("Allow? [o]nce, [s]ession, [a]lways, [D]eny: ").strip().lower()[:1]
    return {"o": "once", "s": "session", "a": "always"}.get(answer, "deny")


def read_message(message: str) -> str:
    """The prompt: the argument, or stdin when it is ``-`` (prompts past the argument limit)."""
    from stages.errors import UsageError
    if message != "-":
        if not message.strip():
            raise UsageError("the message is empty")
        return message
    text = sys.stdin.read()
    if not text.strip():
        raise UsageError("the message is '-' but stdin held no prompt")
    return text


def run(args: argparse.Namespace) -> int:
    from pipeline.cli.local_profile import offered_toolsets, runs_embedded
    from pipeline.cli.resume import check_resume
    from pipeline.mcp_config import configured_mcp_tools
    from pipeline.memory_tool import memory_tool
    from pipeline.providers import LOCAL_NOTICE
    from pipeline.skills_tools import skill_tools
    from pipeline.toolsets import builtin_tools
    message = read_message(args.message)
    check_resume(args.home, args.resume)
    home, workdir = args.home or cfg.home(), Path(args.workdir or Path.cwd())
    embedded = runs_embedded(args)
    if embedded:  # before the agent opens: starting the model takes a while
        print(LOCAL_NOTICE, file=sys.stderr)
    toolsets = offered_toolsets(args, embedded)
    tools = None if toolsets is None else builtin_tools(workdir, toolsets=toolsets)
    # The config's MCP servers start before the agent: their schemas go into the first request.
    mcp = None if tools is None else configured_mcp_tools(home, workdir, args.sandbox)
    if tools is not None:  # still the toolset: the agent restores its todo list, closes it
        tools = attrs.evolve(tools, tools=(*tools, memory_tool(home), *skill_tools(home, workdir),
                                           *(mcp or ())))
    try:
        return _run_turn(args, message, tools, workdir, embedded)
    finally:
        if mcp is not None:
            mcp.close()


def _output_schema(path: Path | None) -> Any:
    """``--output-schema``: the JSON schema in ``path`` (None: a free-text answer)."""
    if path is None:
        return None
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"--output-schema {path}: cannot read a JSON schema: {exc}") from exc
    if not isinstance(schema, dict):
        raise UsageError(f"--output-schema {path}: a JSON schema is an object")
    return schema


def _run_turn(args: argparse.Namespace, message: str, tools: Any, workdir: Path,
              embedded: bool) -> int:
    from pipeline.agent import Agent
    from pipeline.cli.signals import EXIT_SIGNALLED, signals_interrupt
    from pipeline.cli.turn_lines import TurnLines, usage_line
    # Without a terminal nobody can answer: dangerous commands are denied.
    approve = _ask_approval if sys.stdin.isatty() and args.message != "-" else None
    stream = not args.no_stream
    schema = _output_schema(args.output_schema)
    with Agent(model=args.model, base_url=args.base_url, provider=args.provider,
               api_mode=args.api_mode, tools=tools or (), home=args.home, cwd=workdir,
               session_id=args.resume, max_turns=args.max_turns, max_tokens=args.max_tokens,
               timeout=args.timeout, deadline=args.deadline, stream=stream,
               durability=args.durability, sandbox=args.sandbox,
               record_tokens=args.record_tokens, tokenizer=args.tokenizer,
               event_listener=TurnLines(progress=embedded),
               approval_callback=approve) as agent:
        shown: list[str] = []

        def show(delta: str) -> None:
            shown.append(delta)
            sys.stdout.write(printable(delta))
            sys.stdout.flush()
        with signals_interrupt(agent) as received:
            # A structured answer is shown once checked, not as each attempt streams.
            result = agent.run_conversation(
                message, system_message=args.system, output_type=schema,
                stream_callback=show if stream and schema is None else None)
    unshown = _unshown(result["final_response"] or "", "".join(shown))
    sys.stdout.write(printable(unshown) + "\n")
    for warning in result["warnings"]:
        print(printable(f"mibyan: context {warning}"), file=sys.stderr)
    if result["failed"]:
        print(printable(f"mibyan: the turn failed: {result['error']}"), file=sys.stderr)
    elif not result["completed"] and not received:
        print(f"mibyan: the turn did not complete ({result['turn_exit_reason']}): the answer "
              "above is partial", file=sys.stderr)
    print(usage_line(result), file=sys.stderr)
    if received:
        return EXIT_SIGNALLED + received[0]
    # A cut-off or budget-ended answer is not the answer asked for: scripts must see that.
    return EXIT_OK if result["completed"] else EXIT_FAILED


def sessions(args: argparse.Namespace) -> int:
    from pipeline.cli.cmd_insights import warn_problems
    from pipeline.insights.query import query_index
    from pipeline.insights.views import SESSIONS_WITH_LINEAGE
    # Through the index, which checks each log's chain as `log verify` does: a log it found a
    # problem in is listed as broken (with what it holds up to the problem), not as a good one.
    # The last column says whether the log is signed, unsigned (older than signed logs), or
    # broken (a forged record too: its signature fails).
    columns, rows, report = query_index(_root(args), SESSIONS_WITH_LINEAGE)
    broken = {sid for sid, _ in report.problems}
    unsigned = set(report.unsigned)
    at = columns.index("status")

    def log_state(sid: str) -> str:
        return "broken" if sid in broken else "unsigned" if sid in unsigned else "signed"

    _table([*columns, "log"],
           [(*((*row[:at], "broken", *row[at + 1:]) if row[0] in broken else row),
             log_state(row[0])) for row in rows])
    warn_problems(f"{sid}: {problem}" for sid, problem in report.problems)
    return EXIT_OK


def verify(args: argparse.Namespace) -> int:
    from effects.eventlog.store import session_path
    from effects.eventlog.store import verify as verify_log
    from stages.errors import UsageError
    path = session_path(_root(args), args.session)
    if not path.exists():
        raise UsageError(f"no session {args.session!r} under {_root(args)}")
    report = verify_log(path)
    tail = " (torn last record; it will be cut on the next open)" if report.torn_tail else ""
    problems = report.problems or _unreadable_events(path)
    if not problems:
        print(f"ok: {report.count} records, {_signature(report)}{tail}")
        return EXIT_OK
    print(f"BROKEN: {path}: {report.count} good records{tail}")
    for problem in problems:
        print(f"  {problem}")
    return EXIT_FAILED


def _signature(report: Any) -> str:
    keys = ", ".join(report.key_ids)
    if report.signature == "unsigned":
        return "unsigned (written before logs were signed)"
    if report.signature == "partly signed":
        return f"{report.signed} of them signed (key {keys}; the first ones are older)"
    return f"signed (key {keys})"


def log_command(args: argparse.Namespace) -> int:
    """``mibyan log verify | export-key | import-key``."""
    from effects.eventlog.keys import export_key, import_key
    if args.log_command == "verify":
        return verify(args)
    if args.log_command == "export-key":
        key_id = export_key(_root(args), args.file)
        print(f"wrote the signing key {key_id} of {_root(args).parent} to {args.file}; "
              "keep it private: whoever holds it can sign logs this home accepts")
        return EXIT_OK
    key_id = import_key(_root(args), args.file)
    print(f"imported key {key_id}: the logs it signed verify in {_root(args).parent}")
    return EXIT_OK


def _unreadable_events(path: Path) -> tuple[str, ...]:
    """Well-chained records whose payload does not read as its event (replay and resume would
    refuse them): the codec, upcasters included, is the last word on a log."""
    from effects.eventlog.codec import from_payload
    from effects.eventlog.store import read_envelopes
    from stages.errors import LogCorruptError
    problems = []
    for envelope in read_envelopes(path):
        try:
            from_payload(envelope.kind, envelope.schema_version, envelope.payload)
        except LogCorruptError as exc:
            problems.append(f"seq {envelope.seq}: {exc}")
    return tuple(problems)


def sql(args: argparse.Namespace) -> int:
    from pipeline.insights.query import query_index
    columns, rows, report = query_index(_root(args), args.query, rebuild=args.reindex,
                                        timeout=args.timeout)
    _table(columns, rows)
    from pipeline.cli.cmd_insights import warn_problems
    warn_problems(f"{sid}: {problem}" for sid, problem in report.problems)
    return EXIT_OK


def _table(columns: list[str], rows: list[tuple]) -> None:
    cells = [[("" if v is None else printable(str(v))) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


def chat(args: argparse.Namespace) -> int:
    from pipeline.cli.cmd_chat import chat as run_chat
    return run_chat(args)


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "log":
        return log_command(args)
    if args.command in ("replay", "fork", "diff"):
        from pipeline.cli import cmd_replay
        return {"replay": cmd_replay.replay, "fork": cmd_replay.fork,
                "diff": cmd_replay.diff}[args.command](args)
    if args.command == "traces":
        from pipeline.cli.cmd_traces import traces
        return traces(args)
    if args.command == "rollback":
        from pipeline.cli.cmd_rollback import rollback
        return rollback(args)
    if args.command == "insights":
        from pipeline.cli.cmd_insights import insights
        return insights(args)
    if args.command in ("serve", "cron"):
        from pipeline.cli import cmd_cron, cmd_serve
        return {"serve": cmd_serve.serve, "cron": cmd_cron.cron}[args.command](args)
    if args.command in ("export", "batch", "eval"):
        from pipeline.cli import cmd_export
        return {"export": cmd_export.export, "batch": cmd_export.batch,
                "eval": cmd_export.evaluate}[args.command](args)
    return {"run": run, "sessions": sessions, "sql": sql, "chat": chat}[args.command](args)
