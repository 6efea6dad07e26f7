"""``mibyan traces SESSION``: a past session's spans, from its log, as OTLP JSON to a file,
standard output, or an OTLP/HTTP collector (``pipeline.telemetry.otlp``)."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline import config as cfg
from stages.errors import UsageError

EXIT_OK = 0


def _headers(pairs: list[str]) -> dict[str, str]:
    headers = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--header takes NAME=VALUE, not {pair!r}")
        headers[name.strip()] = value.strip()
    return headers


def traces(args: argparse.Namespace) -> int:
    from pipeline.telemetry import otlp
    headers = _headers(args.header)
    if headers and args.endpoint is None:
        raise UsageError("--header goes with --endpoint")
    if args.output is not None and args.endpoint is not None:
        raise UsageError("choose --output or --endpoint, not both")
    spans = otlp.session_spans((args.home or cfg.home()) / "sessions", args.session)
    body = otlp.request(spans)
    if args.endpoint is not None:
        otlp.send(body, args.endpoint, headers=headers)
        print(f"{len(spans)} spans sent to {args.endpoint}", file=sys.stderr)
    elif args.output is not None:
        args.output.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
        print(f"{len(spans)} spans written to {args.output}", file=sys.stderr)
    else:
        print(json.dumps(body, indent=1))
    return EXIT_OK
