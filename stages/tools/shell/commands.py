"""What one simple command does, read from its words after the wrappers are stripped: the
rules for ``rm``, ``find``, ``git``, ``dd``, ``kill``... and for the commands that run other
code (shells, ``eval``, ``xargs``, interpreters, database clients)."""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from stages.tools.danger import Danger
from stages.tools.shell import kinds
from stages.tools.shell.code import code_argument, interpreter, scan_code, scan_sql
from stages.tools.shell.paths import (
    KERNEL,
    is_disk,
    is_protected,
    outside_tree,
    resolve,
    system_file,
)
from stages.tools.shell.words import DYN
from stages.tools.shell.wrappers import name_of, unwrap

__all__ = ["Call", "Script", "Stream", "classify", "written"]

Script = Callable[[str, tuple[str, ...]], "tuple[Danger, ...]"]
"""Reads a string as a shell script (``sh -c``, ``eval``), with its positional parameters
(``$0``, ``$1``...), and returns its dangers."""


@attrs.frozen(kw_only=True)
class Stream:
    """What flows into a command (or out of one, into the next stage of a pipeline): its text
    when that is static, and whether it came off the network."""

    text: str | None
    network: bool = False


@attrs.frozen(kw_only=True)
class Call:
    argv: tuple[str, ...]
    stdin: Stream | None
    cwd: str | None
    script: Script


Rule = Callable[[tuple[str, ...], Call], "tuple[Danger, ...]"]

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "posh", "fish",
                     "csh", "tcsh", "rbash"})
_SQL_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "sqlite", "sqlcmd", "duckdb",
                          "clickhouse-client", "clickhouse", "cockroach", "cqlsh", "snowsql",
                          "bq", "mongosh", "mongo", "pgcli", "mycli", "litecli", "usql"})
_SECRETS = re.compile(r"(?:^|/)(?:\.ssh/|\.env(?:\.|$)|\.(?:bash|zsh)rc$|\.profile$|"
                      r"\.bash_profile$|\.zshenv$|\.zprofile$|\.netrc$|\.pgpass$)")


def classify(call: Call) -> tuple[Danger, ...]:
    """The dangers of one simple command, most severe first within it."""
    argv = unwrap(call.argv)
    if not argv:
        return ()
    if DYN in argv[0]:
        return (kinds.DYNAMIC_COMMAND,)
    name, args = name_of(argv[0]), argv[1:]
    rule = _RULES.get(name)
    if rule is not None:
        return rule(args, call)
    if name.startswith(("mkfs", "mke2fs", "mkdosfs", "mkntfs")):
        return (kinds.MKFS,)
    if name in _SHELLS:
        return _shell(args, call)
    if name in _SQL_CLIENTS:
        return scan_sql(" ".join(args) + "\n" + (call.stdin.text or "" if call.stdin else ""))
    family = interpreter(name)
    if family is not None:
        return _interpreter(family, args, call)
    return ()


def written(path: str, *, truncate: bool) -> tuple[Danger, ...]:
    """The danger of writing to ``path`` (``truncate``: emptied first, as ``>`` does)."""
    if path in KERNEL:
        return (kinds.KERNEL_WRITE,)
    if is_disk(path):
        return (kinds.RAW_DISK_WRITE,)
    if _SECRETS.search(path):
        return (kinds.SECRETS_EDIT,)
    if system_file(path):
        return (kinds.SYSTEM_FILE_WRITE,)
    if truncate and outside_tree(path):
        return (kinds.OVERWRITE_OUTSIDE,)
    return ()


def _split(args: tuple[str, ...]) -> tuple[set[str], list[str]]:
    """Options (each letter of ``-rf`` apart) and operands, ``--`` ending the options."""
    options: set[str] = set()
    operands: list[str] = []
    done = False
    for arg in args:
        if not done and arg == "--":
            done = True
        elif not done and arg.startswith("--"):
            options.add(arg.partition("=")[0])
        elif not done and arg.startswith("-") and len(arg) > 1:
            options.update("-" + letter for letter in arg[1:])
        else:
            operands.append(arg)
    return options, operands


# --- deleting, writing, formatting ---------------------------------------------------------
def _rm(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    options, operands = _split(args)
    recursive = bool({"-r", "-R", "--recursive"} & options)
    paths = [resolve(p, call.cwd) for p in operands]
    if recursive and any(is_protected(p) for p in paths):
        return (kinds.RM_ROOT,)
    # A word only known when it runs may be options (``rm $R x`` with R=-rf).
    hidden = any(p.startswith(DYN) for p in operands) and len(operands) > 1
    return (kinds.RECURSIVE_DELETE,) if recursive or hidden else ()


def _mv(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    _, operands = _split(args)
    sources = [resolve(p, call.cwd) for p in operands[:-1]]
    return (kinds.RM_ROOT,) if any(is_protected(p) for p in sources) else ()


def _find(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    at = next((i for i, a in enumerate(args) if a.startswith(("-", "(", "!"))), len(args))
    starts, expression = [resolve(p, call.cwd) for p in args[:at]], args[at:]
    protected = any(is_protected(p) for p in starts)
    found: list[Danger] = []
    if "-delete" in expression:
        found.append(kinds.RM_ROOT if protected else kinds.FIND_DELETE)
    for i, arg in enumerate(expression):
        if arg not in ("-exec", "-execdir", "-ok", "-okdir"):
            continue
        inner = tuple(DYN if a == "{}" else a for a in
                      _until(expression[i + 1:], (";", "+")))
        if inner and name_of(unwrap(inner)[0] if unwrap(inner) else "") == "rm":
            found.append(kinds.RM_ROOT if protected else kinds.FIND_DELETE)
        found.extend(classify(attrs.evolve(call, argv=inner, stdin=None)))
    return tuple(found)


def _until(args: tuple[str, ...], ends: tuple[str, ...]) -> tuple[str, ...]:
    end = next((i for i, a in enumerate(args) if a in ends), len(args))
    return args[:end]


def _xargs(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    with_value = {"-d", "-I", "-n", "-P", "-L", "-s", "-a", "-E", "-i", "--delimiter",
                  "--max-args", "--max-procs", "--arg-file", "--replace"}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in with_value else 1
    inner = args[i:] or ("echo",)
    data = call.stdin.text if call.stdin else None
    extra = tuple(data.split()) if data is not None else (DYN,)
    found = classify(attrs.evolve(call, argv=(*inner, *extra), stdin=None))
    removes = name_of(unwrap(inner)[0] if unwrap(inner) else "") == "rm"
    hard = tuple(d for d in found if d.hard)
    return hard or ((kinds.XARGS_RM,) if removes else ()) + found


def _dd(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    targets = [resolve(a[3:], call.cwd) for a in args if a.startswith("of=")]
    if not targets:
        return ()
    return written(targets[0], truncate=False) or (kinds.DISK_COPY,)


def _copy(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    """``cp``/``install``/``ln`` write their destination as ``>`` would."""
    _, operands = _split(args)
    if len(operands) < 2:
        return ()
    return written(resolve(operands[-1], call.cwd), truncate=True)


def _tee(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    options, operands = _split(args)
    append = bool({"-a", "--append"} & options)
    return tuple(d for p in operands for d in written(resolve(p, call.cwd), truncate=not append))


def _shred(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    _, operands = _split(args)
    disk = any(is_disk(resolve(p, call.cwd)) for p in operands)
    return (kinds.RAW_DISK_WRITE,) if disk else (kinds.SHRED,)


def _truncate(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    return (kinds.TRUNCATE_FILE,)


def _rsync(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    options, operands = _split(args)
    if not any(o.startswith(("--del", "--remove-source-files")) for o in options):
        return ()
    target = resolve(operands[-1], call.cwd) if operands else ""
    return (kinds.RM_ROOT,) if is_protected(target) else (kinds.RSYNC_DELETE,)


def _permissions(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    options, operands = _split(args)
    found: list[Danger] = []
    if any(re.fullmatch(r"0?[0-7]?777|0?666|(?:a|o|ugo|go)\+[rx]*w[rx]*", o) for o in operands):
        found.append(kinds.WORLD_WRITABLE)
    if {"-R", "--recursive"} & options:
        found.append(kinds.RECURSIVE_CHOWN_CHMOD)
    if any(resolve(p, call.cwd).startswith(("/etc", "/usr", "/bin", "/sbin", "/var", "/boot"))
           for p in operands):
        found.append(kinds.SYSTEM_PERMISSIONS)
    return tuple(found)


# --- processes and the machine ---------------------------------------------------------------
def _kill(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    pids: list[str] = []
    signal_given = False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg in ("-s", "-n", "--signal"):
            rest = rest[1:]
            signal_given = True
        elif arg == "--":
            pids.extend(rest)
            break
        elif arg.startswith("-") and not signal_given and arg not in ("-1",):
            signal_given = True
        elif arg == "-1" and not signal_given and not rest:
            pids.append(arg)  # `kill -1`: read as the pid -1, the stricter reading
        elif arg == "-1" and not signal_given:
            signal_given = True  # `kill -1 PID`: the signal HUP
        else:
            pids.append(arg)
    return (kinds.KILL_ALL,) if "-1" in pids else ()


def _killall(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    return (kinds.KILL_PROCESSES,)


def _shutdown(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    return (kinds.SHUTDOWN,)


def _init(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    return (kinds.SHUTDOWN,) if args[:1] in (("0",), ("6",)) else ()


def _systemctl(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    _, operands = _split(args)
    verb = operands[0] if operands else ""
    if verb in ("poweroff", "reboot", "halt", "kexec", "emergency", "rescue"):
        return (kinds.SHUTDOWN,)
    return (kinds.SERVICE_STOP,) if verb in ("stop", "disable", "mask", "kill") else ()


def _service(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    return (kinds.SERVICE_STOP,) if "stop" in args[1:2] else ()


def _docker(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    options, operands = _split(args)
    words = " ".join(operands[:2])
    if DYN in words:
        return (kinds.DYNAMIC_COMMAND,)
    force = bool({"-f", "--force"} & options)
    if words in ("system prune", "volume rm", "volume prune", "container prune",
                 "image prune", "network prune") or (operands[:1] in (["rm"], ["rmi"]) and force):
        return (kinds.DOCKER_DESTROY,)
    return ()


# --- git ------------------------------------------------------------------------------------
_GIT_VALUES = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
               "--config-env", "--super-prefix"}


def _git(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_VALUES else 1
    if i >= len(args):
        return ()
    verb, rest = args[i], args[i + 1:]
    if DYN in verb:
        return (kinds.DYNAMIC_COMMAND,)
    options, operands = _split(rest)
    if verb == "reset" and "--hard" in options:
        return (kinds.GIT_RESET_HARD,)
    if verb == "push" and ({"-f", "--force", "--force-with-lease", "--mirror"} & options
                           or any(o.startswith("+") for o in operands)):
        return (kinds.GIT_FORCE_PUSH,)
    if verb == "clean" and {"-f", "--force"} & options:
        return (kinds.GIT_CLEAN,)
    return ()


# --- code: shells, eval, interpreters --------------------------------------------------------
def _shell(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    i, reads_input = 0, False
    while i < len(args) and args[i][:1] in ("-", "+") and args[i] not in ("-", "--"):
        arg = args[i]
        if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if not arg.startswith("--") and "c" in arg[1:]:
            string = args[i + 1] if i + 1 < len(args) else ""
            # sh -c 'rm -rf "$1"' sh /: the words after the string are $0, $1...
            return (kinds.SHELL_STRING,) if DYN in string else call.script(string, args[i + 2:])
        reads_input = reads_input or (not arg.startswith("--") and "s" in arg[1:])
        i += 1
    operands = args[i + (1 if args[i:i + 1] == ("--",) else 0):]
    if operands and not reads_input and operands[0] != "-":
        return _from_file(operands[0], call)
    return _input_code(call, shell=True)


def _from_file(path: str, call: Call) -> tuple[Danger, ...]:
    """A script given as a file: one in the tree is the user's; one from a pipe is data."""
    if path in ("/dev/stdin", "/dev/fd/0"):
        return _input_code(call, shell=True)
    return (kinds.CODE_FROM_DATA,) if path.startswith(("/dev/fd/", "/proc/self/fd/")) else ()


def _input_code(call: Call, *, shell: bool) -> tuple[Danger, ...]:
    """Code a shell or an interpreter reads from its input."""
    stdin = call.stdin
    if stdin is None:
        return ()
    if stdin.network:
        return (kinds.PIPE_TO_SHELL,)
    if stdin.text is None or DYN in stdin.text:
        return (kinds.CODE_FROM_DATA,)
    return call.script(stdin.text, ()) if shell else scan_code(stdin.text, call.script)


def _eval(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    text = " ".join(args)
    return (kinds.SHELL_STRING,) if DYN in text else call.script(text, ())


def _alias(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    """``alias x='rm -rf /'``: what the alias would run is read as a command."""
    return tuple(d for a in args if "=" in a for d in _eval((a.partition("=")[2],), call))


def _source(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    return _from_file(args[0], call) if args else ()


def _trap(args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    return _eval(args[:1], call) if args and not args[0].startswith("-") else ()


def _interpreter(family: str, args: tuple[str, ...], call: Call) -> tuple[Danger, ...]:
    code = code_argument(family, args)
    if code is not None:
        return (kinds.CODE_FROM_DATA,) if DYN in code else scan_code(code, call.script)
    if family == "awk":
        return ()
    operands = [a for a in args if not a.startswith("-")]
    if operands:
        return _from_file(operands[0], call)
    return _input_code(call, shell=False)


_RULES: dict[str, Rule] = {
    "rm": _rm, "mv": _mv, "find": _find, "xargs": _xargs,
    "dd": _dd, "cp": _copy, "install": _copy, "ln": _copy, "tee": _tee,
    "shred": _shred, "wipefs": _shred, "truncate": _truncate, "rsync": _rsync,
    "chmod": _permissions, "chown": _permissions, "chgrp": _permissions,
    "kill": _kill, "pkill": _killall, "killall": _killall,
    "shutdown": _shutdown, "reboot": _shutdown, "halt": _shutdown, "poweroff": _shutdown,
    "init": _init, "telinit": _init, "systemctl": _systemctl, "service": _service,
    "docker": _docker, "podman": _docker, "git": _git,
    "eval": _eval, "source": _source, ".": _source, "trap": _trap, "alias": _alias,
}
