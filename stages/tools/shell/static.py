"""The output of commands that only turn their words or their input into text (``echo``,
``printf``, ``base64 -d``, ``rev``, ``xxd -r -p``, ``cat``), so that ``$(echo rm)`` and
``echo cm0gLXJmIC8= | base64 -d | sh`` are read as the text they produce."""

from __future__ import annotations

import base64
import binascii
import re

from stages.tools.shell.words import DYN, ansi_c

__all__ = ["output"]

_LOOKUPS = {"which", "type", "command"}


def output(argv: tuple[str, ...], stdin: str | None) -> str | None:
    """What ``argv`` prints when that depends only on its words and ``stdin`` (None: its
    input is unknown), or None."""
    if not argv or any(DYN in a for a in argv):
        return None
    name, args = argv[0].rpartition("/")[2], argv[1:]
    if name == "echo":
        return _echo(args)
    if name == "printf":
        return _printf(args)
    if name in _LOOKUPS:  # $(which rm), $(command -v rm): the name itself
        names = [a for a in args if not a.startswith("-")]
        return names[-1] + "\n" if names else None
    if stdin is None:
        return None
    if name == "cat" and not args:
        return stdin
    if name == "rev" and not args:
        return "\n".join(line[::-1] for line in stdin.split("\n"))
    if name in ("base64", "base32") and {"-d", "--decode", "-D"} & set(args):
        return _decode(name, stdin)
    if name == "xxd" and "-r" in args and "-p" in args:
        try:
            return bytes.fromhex("".join(stdin.split())).decode("utf-8", "replace")
        except ValueError:
            return None
    return None


def _echo(args: tuple[str, ...]) -> str:
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        newline = newline and "n" not in args[0]
        escapes = "e" in args[0].replace("E", "") or (escapes and "E" not in args[0])
        args = args[1:]
    text = " ".join(args)
    return (ansi_c(text) if escapes else text) + ("\n" if newline else "")


def _printf(args: tuple[str, ...]) -> str | None:
    if not args:
        return None
    form, values = ansi_c(args[0]), list(args[1:])
    text = re.sub(r"%[bs]", lambda _: values.pop(0) if values else "", form)
    return None if "%" in text.replace("%%", "") else text.replace("%%", "%")


def _decode(name: str, text: str) -> str | None:
    try:
        data = (base64.b64decode("".join(text.split()), validate=False) if name == "base64"
                else base64.b32decode("".join(text.split())))
    except (binascii.Error, ValueError):
        return None
    return data.decode("utf-8", "replace")
