"""The words of a parsed command as the shell would see them: quotes, backslashes, ``$'..'``,
variables, brace lists and field splitting resolved as far as the command's own text allows.

A part only known when the command runs (an unknown variable, a substitution that is not
trivially static) becomes :data:`DYN`, so a rule can tell ``rm $X`` from ``rm x``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

from tree_sitter import Node

__all__ = ["DYN", "Env", "fields", "word"]

DYN = "\ue0ff"
"""Stands for text only known when the command runs."""

Env = Mapping[str, "tuple[str, ...] | None"]
"""Variables the command set itself: their fields, or None when their value is unknown."""

Substitute = Callable[[Node], "str | None"]
"""The output of a ``$(...)`` when it is trivially static (``$(echo rm)``), else None."""

# Quoted or escaped characters are kept out of brace expansion and field splitting by moving
# them to private code points until the word is done.
_SHIELD = {" ": "\ue000", "\t": "\ue001", "\n": "\ue002", "{": "\ue003", "}": "\ue004",
           ",": "\ue005"}
_EMPTY = "\ue006"  # a quoted empty string: still a field ("")
_UNSHIELD = str.maketrans({v: k for k, v in _SHIELD.items()} | {_EMPTY: ""})
_SHIELD_TABLE = str.maketrans(_SHIELD)
_MAX_FIELDS = 64
_KNOWN = {"HOME": ("~",), "PWD": (".",)}
"""Environment variables whose meaning is known without their value (paths stay symbolic)."""


def _shield(text: str) -> str:
    return text.translate(_SHIELD_TABLE) if text else _EMPTY


def fields(node: Node, env: Env, substitute: Substitute) -> tuple[str, ...]:
    """The fields ``node`` (one word of a command) expands to."""
    raw = _raw(node, env, substitute)
    out: list[str] = []
    for expanded in _braces(raw):
        out.extend(part.translate(_UNSHIELD) for part in expanded.split())
        if len(out) > _MAX_FIELDS:
            break
    return tuple(out)


def word(node: Node, env: Env, substitute: Substitute) -> str:
    """``node`` as one string (a redirection target, an assignment's value)."""
    return " ".join(fields(node, env, substitute)) or ""


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _raw(node: Node, env: Env, substitute: Substitute) -> str:
    kind = node.type
    if kind == "word":
        return _unescape_bare(_text(node))
    if kind == "number":
        return _text(node)
    if kind == "raw_string":
        return _shield(_text(node)[1:-1])
    if kind == "ansi_c_string":
        return _shield(ansi_c(_text(node)[2:-1]))
    if kind in ("string", "translated_string"):
        return _shield(_quoted(node, env, substitute))
    if kind in ("concatenation", "command_name"):
        return "".join(_parts(node, env, substitute, _raw))
    if kind in ("simple_expansion", "expansion"):
        value = _expansion(node, env, substitute)
        return DYN if value is None else value
    if kind == "command_substitution":
        out = substitute(node)
        return DYN if out is None else out
    if kind == "process_substitution":
        return "/dev/fd/" + DYN
    return DYN


def _parts(node: Node, env: Env, substitute: Substitute,
           each: Callable[[Node, Env, Substitute], str]) -> Iterator[str]:
    """The children's texts, with the source text between them (a gap is literal)."""
    at = node.start_byte
    source = node.text or b""
    for child in node.children:
        if child.start_byte > at:
            yield source[at - node.start_byte:child.start_byte - node.start_byte].decode(
                "utf-8", "replace")
        yield each(child, env, substitute)
        at = child.end_byte
    if node.end_byte > at:
        yield source[at - node.start_byte:].decode("utf-8", "replace")


def _quoted(node: Node, env: Env, substitute: Substitute) -> str:
    """A double-quoted string: expansions keep their spaces, ``\\`` escapes only ``$`\"\\``."""
    def each(child: Node, env: Env, substitute: Substitute) -> str:
        if child.type == '"':
            return ""
        if child.type == "string_content":
            return re.sub(r'\\([$`"\\\n])', r"\1", _text(child))
        if child.type in ("simple_expansion", "expansion"):
            value = _expansion(child, env, substitute)
            return DYN if value is None else value
        if child.type == "command_substitution":
            out = substitute(child)
            return DYN if out is None else out
        return _text(child)
    if node.type == "translated_string":
        node = node.named_children[0] if node.named_children else node
    return "".join(_parts(node, env, substitute, each))


def _unescape_bare(text: str) -> str:
    """An unquoted word: ``\\x`` is a quoted ``x``, the rest stays open to expansion."""
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            escaped = next(chars, "")
            out.append("" if escaped == "\n" else _shield(escaped))
        else:
            out.append(char)
    return "".join(out)


def _expansion(node: Node, env: Env, substitute: Substitute) -> str | None:
    """``$name``, ``${name}``, ``${name[@]}``, ``${name:-default}``; None when unknown."""
    named = node.named_children
    if not named:
        return None
    head = named[0]
    if head.type == "subscript":
        head = head.child_by_field_name("name") or head
    if head.type not in ("variable_name", "special_variable_name"):
        return None
    name = _text(head)
    value = env.get(name) if name in env else _KNOWN.get(name)
    operators = [c.type for c in node.children if not c.is_named and c.type not in ("$", "${",
                                                                                     "}")]
    if operators and operators[0] not in (":-", "-", ":=", "=", ":?", "?"):
        return None  # ${#x}, ${x/a/b}, ${x%y}, ${!x}: computed, not worth evaluating here
    if value is None and operators and operators[0] in (":-", "-", ":=", "=") and len(named) > 1:
        return _raw(named[1], env, substitute)  # the default when the command did not set it
    return None if value is None else " ".join(value)


_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)",
                   re.DOTALL)


def ansi_c(body: str) -> str:
    """The text of ``$'...'`` (or of ``echo -e``/``printf``) with its escapes decoded."""
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "xuU" and len(code) > 1:
            return chr(min(int(code[1:], 16), 0x10FFFF))
        if code[0].isdigit():
            return chr(int(code, 8) & 0xFF)
        if code[0] == "c" and len(code) == 2:
            return chr(ord(code[1]) & 0x1F)
        return _ESCAPES.get(code, "\\" + code)
    return _ANSI.sub(one, body)


_BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")


def _braces(raw: str) -> list[str]:
    """Brace expansion of the unquoted ``{a,b}`` lists (innermost first), up to a bound."""
    out: list[str] = []
    todo = [raw]
    while todo and len(out) + len(todo) <= _MAX_FIELDS:
        text = todo.pop(0)
        match = _BRACE.search(text)
        if match is None:
            out.append(text)
            continue
        todo.extend(text[:match.start()] + choice + text[match.end():]
                    for choice in match.group(1).split(","))
    return out + todo
