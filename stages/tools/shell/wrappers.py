"""Commands that run another command: ``env``, ``sudo``, ``nice``, ``timeout``, ``exec``,
``busybox``... :func:`unwrap` strips them, and turns the ones that take a command as one string
(``su -c``, ``watch``, ``env -S``) into ``sh -c STRING``."""

from __future__ import annotations

import re

__all__ = ["unwrap"]

# wrapper: (options taking a value, whether the first operand is the wrapper's own, e.g.
# timeout's DURATION or chroot's NEWROOT)
_PREFIXES: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R",
                        "--user", "--group", "--host", "--prompt", "--chdir", "--role", "--type",
                        "--other-user"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "--class", "--classdata"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "nohup": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "setsid": (frozenset(), 0),
    "taskset": (frozenset(), 1),
    "chroot": (frozenset({"--userspec", "--groups"}), 1),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "time": (frozenset({"-f", "-o", "--format", "--output"}), 0),
    "unbuffer": (frozenset(), 0),
    "fakeroot": (frozenset(), 0),
    "busybox": (frozenset(), 0),
    "caffeinate": (frozenset({"-t", "-w"}), 0),
    "env": (frozenset({"-u", "-C", "--unset", "--chdir"}), 0),
}
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"),
            ("hatch", "run"), ("rye", "run"), ("conda", "run")}
_RUNNER_OPTIONS = frozenset({"--with", "--python", "-p", "--env", "-n", "--name", "--directory",
                             "--project", "--package", "--group", "--extra"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def name_of(word: str) -> str:
    """The command a word names: ``/usr/bin/rm`` is ``rm``."""
    return word.rpartition("/")[2]


def unwrap(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The command ``argv`` finally runs, its wrappers stripped."""
    for _ in range(16):
        if not argv:
            return argv
        name = name_of(argv[0])
        if (name, argv[1] if len(argv) > 1 else "") in _RUNNERS:
            argv = _skip(argv[2:], _RUNNER_OPTIONS, 0)
            continue
        as_string = _string_runner(name, argv[1:])
        if as_string is not None:
            return as_string
        if name not in _PREFIXES:
            return argv
        if name == "command" and {"-v", "-V"} & set(argv[1:2]):
            return ()  # a look-up, nothing runs
        takes_value, own = _PREFIXES[name]
        rest = _skip(argv[1:], takes_value, own)
        if name == "env":
            while rest and _ASSIGNMENT.match(rest[0]):
                rest = rest[1:]
        if name == "chroot" and not rest:
            rest = ("sh",)
        argv = rest
    return argv


def _skip(args: tuple[str, ...], takes_value: frozenset[str], own: int) -> tuple[str, ...]:
    """``args`` past the wrapper's options and its own operands."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        i += 2 if args[i] in takes_value else 1
    return args[i + own:] if i + own <= len(args) else ()


def _string_runner(name: str, args: tuple[str, ...]) -> tuple[str, ...] | None:
    """``sh -c STRING`` for the wrappers that run a command given as one string."""
    if name == "env":
        for i, arg in enumerate(args):
            if arg in ("-S", "--split-string") and i + 1 < len(args):
                return ("sh", "-c", " ".join(args[i + 1:]))
            if arg.startswith(("-S", "--split-string=")) and len(arg) > 2:
                return ("sh", "-c", " ".join((arg.partition("=")[2] or arg[2:], *args[i + 1:])))
        return None
    if name in ("su", "runuser", "flock", "script") and "-c" in args:
        at = args.index("-c")
        return ("sh", "-c", args[at + 1]) if at + 1 < len(args) else None
    if name == "watch":
        rest = _skip(args, frozenset({"-n", "-d", "--interval", "--differences"}), 0)
        return ("sh", "-c", " ".join(rest)) if rest else None
    return None
