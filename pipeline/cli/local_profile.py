"""What the CLI offers the embedded local model, and the progress it shows while that model
works: the bundled 135M model cannot use tools (given their 1,800 tokens of schemas it invents
their results), and on a CPU it reads a prompt at a few dozen tokens a second, so a silent
terminal looks hung."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline import config as cfg
from pipeline.printable import printable
from pipeline.toolsets import DEFAULT_TOOLSETS

__all__ = ["TOOLS_OFF_NOTICE", "offered_toolsets", "runs_embedded", "show_progress"]

TOOLS_OFF_NOTICE = ("mibyan: no tools are offered to the bundled 135M model, which cannot use "
                    "them (--toolsets offers them anyway, as [local] tools = true does; a GGUF "
                    "file of your own gets them)")


def runs_embedded(args: argparse.Namespace) -> bool:
    """Whether ``run`` or ``chat`` with these arguments talks to the embedded local model."""
    from pipeline.settings import runs_embedded as chooses
    return chooses(args.model, base_url=args.base_url, provider=args.provider,
                   home=args.home, session_id=args.resume)


def offered_toolsets(args: argparse.Namespace, embedded: bool) -> tuple[str, ...] | None:
    """The built-in toolsets ``run`` or ``chat`` offers: None with ``--no-tools``, or on an
    embedded model that cannot use them (``[local] tools``) when ``--toolsets`` names none."""
    from effects.local.model_file import local_settings
    if args.no_tools:
        return None
    if args.toolsets is not None:
        return tuple(args.toolsets)
    if embedded and not local_settings(Path(args.home) if args.home else cfg.home()
                                       ).offers_tools:
        print(TOOLS_OFF_NOTICE, file=sys.stderr)
        return None
    return DEFAULT_TOOLSETS


def show_progress(event: object) -> None:
    """Before each call of the local model: how much it reads before its first word."""
    from pipeline.providers import LOCAL
    from stages.log.events import ModelRequested
    if isinstance(event, ModelRequested) and event.provider == LOCAL:
        print(printable(f"mibyan: the local model reads about {event.estimated_tokens} prompt "
                        "tokens, then writes"), file=sys.stderr)
