"""Code handed to an interpreter (``python -c``, ``perl -e``, ``node -e``, ``ruby -e``, awk)
and SQL handed to a database client: what in it deletes files, starts commands or drops
tables. A shell command written inside the code as a string is read like any other."""

from __future__ import annotations

import re
from collections.abc import Callable

from stages.tools.danger import Danger
from stages.tools.shell import kinds

__all__ = ["INTERPRETERS", "code_argument", "interpreter", "scan_code", "scan_sql"]

Script = Callable[[str, tuple[str, ...]], "tuple[Danger, ...]"]

INTERPRETERS = re.compile(
    r"(?:python|pypy)(?:\d+(?:\.\d+)?)?|perl\d*|ruby|node|nodejs|bun|deno|php\d*|lua\d*(?:\.\d)?"
    r"|luajit|Rscript|osascript|tclsh|awk|gawk|mawk|nawk")
"""Commands that run code given on their command line or their input."""

_CODE_OPTIONS = {"python": ("-c",), "pypy": ("-c",), "perl": ("-e", "-E"), "ruby": ("-e",),
                 "node": ("-e", "--eval", "-p", "--print"), "nodejs": ("-e", "--eval", "-p"),
                 "bun": ("-e", "--eval", "-p", "--print"), "deno": ("eval",), "php": ("-r",),
                 "lua": ("-e",), "luajit": ("-e",), "Rscript": ("-e",), "osascript": ("-e",),
                 "tclsh": ()}
_AWK = {"awk", "gawk", "mawk", "nawk"}
_AWK_VALUES = {"-F", "-v", "-f", "--field-separator", "--assign"}

_DELETE = re.compile(
    r"rmtree|remove_tree|rm_r\b|rm_rf|rmSync|rmdirSync|unlinkSync|\bunlink\b|\brmdir\b|"
    r"os\.remove|\.unlink\(|\.rmdir\(|\bremove\s*\(|fs\.rm\b|fs\.promises\.rm|FileUtils\.rm|"
    r"File\.delete|Dir\.delete|\bdelete_dir|send2trash|truncate\s*\(|\.write_text\(\s*['\"]{2}")
_EXEC = re.compile(
    r"\bsystem\s*\(|\bsystem\s+['\"q]|\bexec[lv]?p?e?\s*\(|\bpopen|subprocess|\bspawn|execSync|"
    r"execFileSync|child_process|\bqx\s*[{(/|]|%x[{(]|`|\bshell_exec|\bpassthru|proc_open|"
    r"os\.exec|pty\.spawn|\bdo\s+shell\s+script|\bexec\s+['\"]|Process\.spawn|Open3|IO\.popen")
_FORK_LOOP = re.compile(r"\bfork\b[\s\S]*\bwhile\b|\bwhile\b[\s\S]*\bfork\b|"
                        r"for\s*\(\s*;\s*;\s*\)[\s\S]*\bfork\b")
_STRING = re.compile(r"'''([\s\S]*?)'''|\"\"\"([\s\S]*?)\"\"\"|'((?:[^'\\\n]|\\.)*)'"
                     r"|\"((?:[^\"\\\n]|\\.)*)\"|`([^`]*)`|q[qx]?\{([^}]*)\}")
_HOME = re.compile(r"expanduser\(\s*['\"]~['\"]\s*\)|Path\.home\(\)|environ\[['\"]HOME|"
                   r"ENV\[['\"]HOME|\$ENV\{HOME\}|homedir\(\)|getenv\(['\"]HOME|Dir\.home")
_PROTECTED = re.compile(r"/|~/?|/\*|/(?:bin|boot|etc|home|lib|lib64|opt|root|sbin|srv|sys|usr|"
                        r"var|Users)/?")

_NOT_A_COMMAND = (kinds.DYNAMIC_COMMAND, kinds.UNPARSED, kinds.SHELL_STRING,
                  kinds.CODE_FROM_DATA)

_SQL_DROP = re.compile(r"(?i)\b(?:drop\s+(?:table|database|schema)|truncate\s+(?:table\s+)?"
                       r"[\w`\"\[])")
_SQL_DELETE_ALL = re.compile(r"(?i)\bdelete\s+from\s+[^\s;]+(?![^;]*\bwhere\b)")


def interpreter(name: str) -> str | None:
    """The family of an interpreter command (``python3.12`` is ``python``), or None."""
    if not INTERPRETERS.fullmatch(name):
        return None
    family = re.sub(r"[\d.]+$", "", name)
    return "awk" if family in _AWK else family


def code_argument(family: str, args: tuple[str, ...]) -> str | None:
    """The code given on the command line (``-c CODE``, ``-e CODE``, awk's program), or None
    when the interpreter runs a file or reads its input."""
    if family == "awk":
        i = 0
        while i < len(args) and args[i].startswith("-") and args[i] != "--":
            if args[i] in ("-f", "--file"):
                return None
            i += 2 if args[i] in _AWK_VALUES else 1
        return args[i] if i < len(args) else None
    options = _CODE_OPTIONS.get(family, ())
    for i, arg in enumerate(args):
        if not arg.startswith("-") and arg not in options:
            return None  # a script file (or deno's subcommand other than eval)
        cluster = arg.startswith("-") and not arg.startswith("--") and arg[-1:] in "ceEr"
        if (arg in options or (cluster and "-" + arg[-1] in options)) and i + 1 < len(args):
            return args[i + 1]
    return None


def scan_code(code: str, script: Script) -> tuple[Danger, ...]:
    """The dangers of interpreter code: a fork loop, deleting a protected path, a shell command
    in a string it runs, or any deletion or command it starts (asked)."""
    if _FORK_LOOP.search(code):
        return (kinds.FORK_BOMB,)
    found: list[Danger] = list(scan_sql(code))
    literals = [next(g for g in m.groups() if g is not None) for m in _STRING.finditer(code)]
    if _EXEC.search(code):
        commands = [*literals, " ".join(literals)]  # subprocess.run(["rm", "-rf", "/"])
        # A string that is no command (a message, "$x") reads as a dynamic or unparsed one:
        # only what a real command in it does counts.
        found.extend(d for text in commands for d in script(text, ()) if d not in _NOT_A_COMMAND)
        found.append(kinds.INTERPRETER_COMMAND)
    if _DELETE.search(code):
        protected = _HOME.search(code) or any(_PROTECTED.fullmatch(t) for t in literals)
        found.append(kinds.RM_ROOT if protected else kinds.INTERPRETER_DELETE)
    return tuple(found)


def scan_sql(text: str) -> tuple[Danger, ...]:
    """``DROP TABLE``, ``TRUNCATE``, a ``DELETE FROM`` with no ``WHERE``."""
    if _SQL_DROP.search(text):
        return (kinds.SQL_DROP,)
    if _SQL_DELETE_ALL.search(text):
        return (kinds.SQL_DELETE_ALL,)
    return ()
