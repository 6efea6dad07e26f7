"""Whether a shell command is plainly read-only: the one kind of command that runs without a
question where no sandbox can start (``stages.tools.unconfined``).

Conservative on purpose: a single simple command, no shell syntax at all (no pipes, lists,
redirections, substitutions, variables, escapes), a program from a short list that reads and
prints, and none of the options by which those programs write files or run other programs.
Anything this cannot see through is not read-only; a false "no" costs a question, a false
"yes" an unconfined write.
"""

from __future__ import annotations

import shlex

__all__ = ["is_read_only"]

# Characters that make a command more than one program with plain arguments: pipes and lists,
# redirections, substitutions and variables, subshells and groups, escapes, history, comments.
_SHELL_SYNTAX = frozenset(";&|<>`$(){}\\!#\n\r")

_PROGRAMS = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "rg", "find", "pwd", "echo"})
# find: the actions that delete, run a program or write a file.
_FIND_ACTIONS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint",
                           "-fprint0", "-fprintf", "-fls"})
# rg: a preprocessor is a program rg runs on every file.
_RG_OPTIONS = ("--pre",)
_GIT_COMMANDS = frozenset({"status", "log", "diff", "show"})
# git: writing the output to a file, or running configured diff drivers and filters.
_GIT_OPTIONS = ("--output", "--ext-diff", "--textconv")


def is_read_only(command: str) -> bool:
    """True only for a command that plainly reads and prints (``ls -la src``, ``git status``,
    ``grep -rn TODO .``); False for everything else, and for anything unclear."""
    if not command.strip() or any(c in _SHELL_SYNTAX for c in command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote
        return False
    program, arguments = words[0], words[1:]
    if program == "git":
        # Nothing before the subcommand: ``git -c`` sets configuration that runs programs.
        return bool(arguments) and arguments[0] in _GIT_COMMANDS \
            and not _any_option(arguments[1:], _GIT_OPTIONS)
    if program not in _PROGRAMS:
        return False
    if program == "find":
        return not any(a in _FIND_ACTIONS for a in arguments)
    if program == "rg":
        return not _any_option(arguments, _RG_OPTIONS)
    return True


def _any_option(arguments: list[str], options: tuple[str, ...]) -> bool:
    return any(a == o or a.startswith(o + "=") or (o.startswith("--") and a.startswith(o))
               for a in arguments for o in options)
