"""``mibyan``: the command line. Heavy modules (SDKs, DuckDB) are imported by the command that
needs them, so ``mibyan --help`` starts fast."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline.cli.signals import EXIT_SIGNALLED
from pipeline.insights.query import DEFAULT_TIMEOUT as DEFAULT_SQL_TIMEOUT
from pipeline.toolsets import DEFAULT_TOOLSETS, TOOLSETS
from stages.log.events import SANDBOX_MODES

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def _at_most(most: int) -> Callable[[str], int]:
    """A whole number from 1 to ``most``: past it a value is a typo, or one that overflows
    further on (a date, a process pool, a socket)."""
    def whole(text: str) -> int:
        value = _positive_int(text)
        if value > most:
            raise argparse.ArgumentTypeError(f"must be a whole number of at most {most}, "
                                             f"got {text!r}")
        return value
    return whole


MAX_TURNS, MAX_TOKENS, MAX_JOBS, MAX_DAYS = 1_000_000, 10_000_000, 256, 36_500


def _port(text: str) -> int:
    """0 (any free port, which the server then names) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65_535:
        raise argparse.ArgumentTypeError(f"must be a port, 0 to 65535, got {text!r}")
    return value


def _directory(text: str) -> str:
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"no such directory: {text!r}")
    return text


def _toolsets(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in TOOLSETS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown toolset(s) {', '.join(unknown) or text!r}; choose from {', '.join(TOOLSETS)}")
    return names


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _turn_options(command: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``chat`` share: the endpoint, the session, the budgets and
    the tools."""
    command.add_argument("--model", help="model name (else $MIBYAN_MODEL or config.toml)")
    command.add_argument("--base-url", help="provider endpoint (else $OPENAI_BASE_URL)")
    command.add_argument("--provider", help="openai (default), anthropic, or a name of yours")
    command.add_argument("--api-mode", choices=("chat_completions", "codex_responses",
                                                "anthropic_messages"),
                         help="the provider API (else detected from provider and endpoint)")
    command.add_argument("--resume", metavar="SESSION", help="continue this session")
    command.add_argument("--max-turns", type=_at_most(MAX_TURNS), default=None,
                         help="model calls per turn (500)")
    command.add_argument("--max-tokens", type=_at_most(MAX_TOKENS),
                         help="output cap per model call")
    command.add_argument("--no-tools", action="store_true", help="offer the model no tools")
    command.add_argument("--toolsets", type=_toolsets, default=None,
                         help=f"built-in toolsets, comma-separated (of {', '.join(TOOLSETS)}; "
                              f"default {','.join(DEFAULT_TOOLSETS)})")
    command.add_argument("--workdir", type=_directory, help="the working tree the tools work "
                         "in (the current directory); the file tools refuse paths outside it")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mibyan", description="An event-sourced LLM agent loop with deterministic replay.")
    parser.add_argument("--home", type=Path, help="state directory (default: $MIBYAN_HOME or "
                        "~/.mibyan)")
    parser.add_argument("--require-signed", action="store_true",
                        help="refuse any log record without a signature (as [logs] "
                        "require_signed = true in config.toml does)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run one agent turn and print the answer")
    run.add_argument("message", help="the user message ('-': read it from stdin)")
    run.add_argument("--system", help="system prompt for this turn")
    run.add_argument("--output-schema", type=Path, metavar="FILE",
                     help="a JSON schema file the answer must match (structured output): the "
                     "validated JSON answer is printed")

    commands.add_parser("sessions", help="list sessions")
    replay = commands.add_parser("replay", help="re-run a session from its log and compare")
    replay.add_argument("session", nargs="?")
    replay.add_argument("--all", action="store_true", help="replay every session and summarise")
    replay.add_argument("--jobs", type=_at_most(MAX_JOBS), default=None, metavar="N",
                        help="with --all: replay on N processes (default: one per core for a "
                        "large home, else one)")
    _whole_home_options(replay)
    log = commands.add_parser("log", help="event-log maintenance")
    log_commands = log.add_subparsers(dest="log_command", required=True, metavar="ACTION")
    verify = log_commands.add_parser(
        "verify", help="check a session's sequence, hash chain and signatures")
    verify.add_argument("session")
    export_key = log_commands.add_parser(
        "export-key", help="write this home's log signing key to a new file (mode 0600)")
    export_key.add_argument("file", type=Path)
    import_key = log_commands.add_parser(
        "import-key", help="accept the logs another home's key signed (from its export-key)")
    import_key.add_argument("file", type=Path)
    sql = commands.add_parser("sql", help="query all event logs with DuckDB through the "
                              "insights index (events and its views: sessions, turns, "
                              "model_calls, ...)")
    sql.add_argument("query")
    sql.add_argument("--reindex", action="store_true",
                     help="rebuild the index from the logs first")
    sql.add_argument("--timeout", type=_seconds, default=DEFAULT_SQL_TIMEOUT, metavar="SECONDS",
                     help="stop a query still running after this long "
                     f"(default {DEFAULT_SQL_TIMEOUT:g})")

    fork = commands.add_parser(
        "fork", help="replay a session's first records, then go on live with other settings")
    fork.add_argument("session")
    fork.add_argument("--at", type=int, required=True, metavar="SEQ",
                      help="keep the records before SEQ (seq 0 to SEQ-1), then go on from there")
    fork.add_argument("--model", help="the model the fork goes on with")
    fork.add_argument("--provider", help="the provider the fork goes on with")
    fork.add_argument("--api-mode", choices=("chat_completions", "codex_responses",
                                             "anthropic_messages"))
    fork.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="another session setting (max_tokens=512, base_url=URL, ...)")
    fork.add_argument("--restore-tree", action="store_true",
                      help="put the working tree back as it was at the fork point")
    fork.add_argument("--workdir", type=_directory,
                      help="the working tree the fork's tools work in")
    rollback = commands.add_parser(
        "rollback", help="put the working tree back as it was before a turn changed it")
    rollback.add_argument("session")
    rollback.add_argument("--turn", type=_at_most(10**9), default=None, metavar="N",
                          help="the turn whose checkpoint to go back to (default: the latest "
                          "turn that took one)")
    traces = commands.add_parser(
        "traces", help="a past session's OpenTelemetry spans (GenAI conventions), as OTLP JSON")
    traces.add_argument("session")
    traces.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write the OTLP JSON here (default: standard output)")
    traces.add_argument("--endpoint", metavar="URL",
                        help="send them to this OTLP/HTTP collector instead (its base URL or "
                        "its /v1/traces URL)")
    traces.add_argument("--header", action="append", default=[], metavar="NAME=VALUE",
                        help="a header for the collector (an API key)")
    diff = commands.add_parser("diff", help="compare two sessions turn by turn")
    diff.add_argument("a", metavar="A")
    diff.add_argument("b", metavar="B")
    chat = commands.add_parser("chat", help="an interactive session (plain, line by line, when "
                               "stdin is not a terminal)")
    chat.add_argument("--system", help="system prompt added to every turn")
    chat.add_argument("--plain", action="store_true", help="plain text, line by line, even on "
                      "a terminal")
    for command in (run, chat):
        _turn_options(command)
        _model_call_options(command)
        command.add_argument("--sandbox", choices=SANDBOX_MODES, default=None,
                             help="how tool commands are confined (else [sandbox] mode, or "
                             "workspace-write; full-access: not at all)")
    insights = commands.add_parser("insights", help="usage, cost, tools, latency and "
                                   "recoveries over all logs (through the insights index)")
    insights.add_argument("--days", type=_at_most(MAX_DAYS), help="only the last N days")
    insights.add_argument("--model", help="only the sessions and calls of this model")
    insights.add_argument("--json", action="store_true", help="machine-readable output")
    insights.add_argument("--price", action="append", metavar="MODEL=IN,OUT[,CR[,CW]]",
                          help="the price of a model in dollars per million tokens of input, "
                               "output, cache read and cache write (repeatable; overrides "
                               "config.toml [prices] and the built-in table)")
    insights.add_argument("--reindex", action="store_true",
                          help="rebuild the index from the logs first")
    insights.add_argument("--jobs", type=_at_most(MAX_JOBS), default=None, metavar="N",
                          help="read the logs into the index on N processes (default: one "
                          "per core when there is much to read, else one)")
    _whole_home_options(insights)
    # --- the gateway and scheduled runs (pipeline.cli.cmd_serve, pipeline.cli.cmd_cron) ---
    serve = commands.add_parser("serve", help="serve agents over HTTP (OpenAI-compatible API "
                                "and a session API; needs the serve extra)")
    serve.add_argument("--host", help="address to listen on ([serve] host, else 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="port ([serve] port, else 8642; 0: any "
                       "free one)")
    serve.add_argument("--no-auth", action="store_true",
                       help="no bearer tokens (only on a loopback address)")
    cron = commands.add_parser("cron", help="scheduled agent runs (needs the serve extra)")
    actions = cron.add_subparsers(dest="cron_command", required=True, metavar="ACTION")
    cron_add = actions.add_parser("add", help="schedule a prompt: add '0 9 * * *' 'prompt'")
    cron_add.add_argument("schedule", help="five cron fields, local time: m h dom mon dow")
    cron_add.add_argument("prompt", help="what the agent is asked at each run")
    cron_add.add_argument("--model", help="the job's model (else cron run's, $MIBYAN_MODEL or "
                          "config.toml's when it runs)")
    cron_add.add_argument("--provider", help="the job's provider")
    cron_add.add_argument("--base-url", help="the job's provider endpoint")
    actions.add_parser("list", help="the jobs, their next and last runs")
    cron_remove = actions.add_parser("remove", help="unschedule a job")
    cron_remove.add_argument("job", help="the job's id (see list)")
    cron_run = actions.add_parser("run", help="run the jobs that are due (call it every "
                                  "minute, e.g. from crontab)")
    cron_run.add_argument("--job", help="run this job now, due or not")
    for command in (serve, cron_run):
        command.add_argument("--model", help="model name (else $MIBYAN_MODEL or config.toml)")
        command.add_argument("--base-url", help="provider endpoint (else $OPENAI_BASE_URL)")
        command.add_argument("--provider", help="openai (default), anthropic, or a name of yours")
        command.add_argument("--workdir", type=_directory,
                             help="the working tree the tools work in")
        command.add_argument("--toolsets", type=_toolsets, default=None,
                             help=f"built-in toolsets, comma-separated (of {', '.join(TOOLSETS)};"
                                  f" default {','.join(DEFAULT_TOOLSETS)})")
    serve.add_argument("--durability", choices=("durable", "flush"), default="durable",
                       help="fsync the logs at turn ends and before tools (durable) or flush")
    _export_parsers(commands)
    return parser


def _record_tokens_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record-tokens", action="store_true", default=None,
                        help="record each reply's token ids and logprobs and the prompt's "
                        "tokens, for token-level export (else [model] record_tokens)")
    parser.add_argument("--tokenizer", metavar="NAME", default=None,
                        help="with --record-tokens: the tokenizer (Hugging Face name or folder, "
                        "or a .gguf file) that tokenises the prompt and names reply ids the "
                        "provider leaves out (else [tokens] tokenizer)")


def _model_call_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=_seconds, help="seconds without a byte before a "
                        "model call fails (else [model] timeout, or 600)")
    parser.add_argument("--deadline", type=_seconds, help="seconds a whole model call may "
                        "take (else [model] deadline, or three read timeouts)")
    parser.add_argument("--no-stream", action="store_true", help="do not stream the answer")
    _record_tokens_option(parser)
    parser.add_argument("--durability", choices=("durable", "flush"), default="durable",
                        help="fsync the log at turn ends and before tools (durable) or only "
                             "flush")


def _whole_home_options(command: argparse.ArgumentParser) -> None:
    """Where the work over a whole home runs (pipeline.ray_cluster)."""
    command.add_argument("--backend", choices=("processes", "ray"), default="processes",
                         help="a pool of local processes (default) or Ray workers (--jobs of "
                         "them, else one per CPU of the cluster); on Ray the home must be on "
                         "storage every node sees")
    command.add_argument("--ray-address", help="with --backend ray: a Ray cluster to join "
                         "(else a local Ray)")


def _export_parsers(commands: Any) -> None:
    from pipeline.export import names
    export = commands.add_parser("export", help="write trajectories from the logs as training "
                                 "data (ShareGPT, OpenAI fine-tuning, TRL)")
    export.add_argument("out", help="the file to write (.jsonl or .parquet)")
    _format_options(export, names.FORMAT_NAMES)
    export.add_argument("--output", choices=names.OUTPUT_NAMES, help="jsonl or parquet (else from "
                        "the file name's suffix)")
    export.add_argument("--lineage", choices=names.LINEAGE_NAMES, default="stitched",
                        help="a compressed session as one stitched sample (default) or one "
                             "sample per context segment")
    export.add_argument("--provenance", choices=names.PROVENANCE_NAMES,
                        help="where each sample's provenance goes: in the sample (inline), in "
                             "OUT.provenance.jsonl (sidecar) or nowhere; default none for "
                             "openai (only the keys OpenAI documents), else inline")
    export.add_argument("--all-samples", action="store_true",
                        help="keep samples that do not end on an answer of the model "
                             "(by default a sample ends on its last one)")
    export.add_argument("--jobs", type=_at_most(MAX_JOBS), default=None, metavar="N",
                        help="read and shape the sessions on N processes (default: one per "
                        "core when there is much to read, else one); the file is the same")
    _whole_home_options(export)
    _filter_options(export)

    batch = commands.add_parser("batch", help="run one session per prompt of a JSONL file, "
                                "in parallel, then export them")
    batch.add_argument("prompts", help='a JSONL file of {"prompt": ...} lines')
    batch.add_argument("--out", required=True, help="the batch directory (logs, working "
                       "directories, the export); run again to resume")
    batch.add_argument("--workers", type=_positive_int, default=1, help="sessions at a time")
    batch.add_argument("--backend", choices=("local", "ray"), default="local",
                       help="a local process pool (default) or Ray")
    batch.add_argument("--ray-address", help="a Ray cluster to join (else a local Ray)")
    _format_options(batch, names.FORMAT_NAMES)
    _eval_parser(commands)
    batch.add_argument("--model", help="model name (else $MIBYAN_MODEL)")
    batch.add_argument("--base-url", help="provider endpoint (else $OPENAI_BASE_URL)")
    batch.add_argument("--provider", help="openai (default), anthropic, or a name of yours")
    batch.add_argument("--api-mode", choices=("chat_completions", "codex_responses",
                                              "anthropic_messages"))
    batch.add_argument("--max-turns", type=_at_most(MAX_TURNS), default=30,
                       help="model calls per session (30)")
    batch.add_argument("--no-tools", action="store_true", help="offer the model no tools")
    batch.add_argument("--toolsets", type=_toolsets, default=DEFAULT_TOOLSETS,
                       help="built-in toolsets, comma-separated")
    batch.add_argument("--quiet", action="store_true", help="no progress bar")
    _record_tokens_option(batch)


def _filter_options(parser: argparse.ArgumentParser) -> None:
    """Which recorded sessions: the filters of ``export``, shared by ``eval``."""
    parser.add_argument("--completed", action="store_true", help="only sessions whose turns "
                        "all completed")
    parser.add_argument("--model", help="only sessions this model served (or was set for)")
    parser.add_argument("--since", metavar="DATE", help="only sessions started on or after")
    parser.add_argument("--until", metavar="DATE", help="only sessions started on or before")
    parser.add_argument("--no-fallback", action="store_true", help="skip sessions that fell "
                        "back to another provider")
    parser.add_argument("--no-compression", action="store_true",
                        help="skip sessions whose context was compressed")
    parser.add_argument("--min-turns", type=_positive_int, help="at least this many turns")
    parser.add_argument("--max-turns", type=_positive_int, help="at most this many turns")
    parser.add_argument("--tool", help="only sessions that ran this tool")
    parser.add_argument("--task-id", help="only sessions with a turn of this task id")
    parser.add_argument("--session", action="append",
                        help="only the lineage of this session (any of its sessions); repeat")


def _eval_parser(commands: Any) -> None:
    ev = commands.add_parser("eval", help="fork recorded sessions onto other configurations "
                             "and compare the outcomes, paired, with confidence intervals")
    ev.add_argument("--out", required=True, help="a new directory: the forks (a home of its "
                    "own), eval.json and results.parquet")
    ev.add_argument("--configs", type=Path, help="a TOML or JSON file of configurations")
    ev.add_argument("--onto", action="append", metavar="MODEL",
                    help="a configuration of this model (repeat)")
    ev.add_argument("--base-url", help="the endpoint of the --onto configurations")
    ev.add_argument("--provider", help="the provider of the --onto configurations")
    ev.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="a session setting of the --onto configurations (repeat)")
    ev.add_argument("--point", action="append", help="where to fork: turns, last-turn "
                    "(default), first-tool-result or kind:<event kind> (repeat)")
    ev.add_argument("--scorer", action="append", help="exact (default), contains:TEXT, "
                    "regex:PATTERN, py:module:function, judge:MODEL[@BASE_URL] (repeat)")
    ev.add_argument("--limit", type=_positive_int, help="at most N forks per configuration")
    ev.add_argument("--workers", type=_positive_int, default=2, help="forks at a time")
    ev.add_argument("--backend", choices=("local", "threads", "ray"), default="local",
                    help="local processes (default), threads, or Ray")
    ev.add_argument("--ray-address", help="a Ray cluster to join (else a local Ray)")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    _filter_options(ev)


def _format_options(parser: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    parser.add_argument("--format", choices=names, default="sharegpt",
                        help="sharegpt (hermes-agent's form, default), openai or trl")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.require_signed:
        # Through the environment: every reader of a log, in this process and in those it
        # starts (gateway workers, batch and replay pools), asks the home's keyring for it.
        from effects.eventlog.keys import REQUIRE_SIGNED_ENV
        os.environ[REQUIRE_SIGNED_ENV] = "1"
    from pipeline.cli import commands
    from pipeline.cli.dotenv_files import load_dotenv_files
    load_dotenv_files(home=args.home)
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
        return EXIT_SIGNALLED + signal.SIGINT
    except BrokenPipeError:
        return _reader_left()


def _reader_left() -> int:
    """The reader of stdout left (``| head``): stop quietly, as a program killed by SIGPIPE
    would. Python ignores the signal, so a write raised instead; stdout goes to /dev/null so
    that the flush at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_SIGNALLED + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
