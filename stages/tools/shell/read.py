"""Reading a command with bash's tree-sitter grammar and walking it for dangers.

Parsing is pure (no I/O); a parser is cheap to make (about a microsecond), so each reading
makes its own and nothing is shared between threads.
"""

from __future__ import annotations

import tree_sitter
import tree_sitter_bash

from stages.tools.danger import Danger
from stages.tools.shell import kinds
from stages.tools.shell.walk import Walker

__all__ = ["MAX_DEPTH", "dangers"]

_BASH = tree_sitter.Language(tree_sitter_bash.language())

MAX_DEPTH = 8
"""Strings run as code inside strings run as code (``sh -c "eval '...'"``) read this deep;
deeper is not read, and asked about."""


def dangers(command: str, *, cwd: str | None = None, depth: int = 0,
            positional: tuple[str, ...] = ()) -> tuple[Danger, ...]:
    """Every danger of ``command`` in source order; a command the grammar cannot read whole
    adds :data:`kinds.UNPARSED` (what it could read still counts). ``positional`` are ``$0``,
    ``$1``... of a script given to ``sh -c``."""
    if depth > MAX_DEPTH:
        return (kinds.UNPARSED,)
    tree = tree_sitter.Parser(_BASH).parse(command.encode("utf-8", "surrogatepass"))
    walker = Walker(lambda text, args: dangers(text, cwd=walker.cwd, depth=depth + 1,
                                               positional=args), cwd, positional)
    walker.statements(tree.root_node)
    return (*walker.found, kinds.UNPARSED) if tree.root_node.has_error else tuple(walker.found)
