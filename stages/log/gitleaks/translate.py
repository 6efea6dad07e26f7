"""Go RE2 patterns (gitleaks writes its rules in them) as patterns for Python's ``re``.

The two dialects agree on almost everything the rules use; what differs:

* RE2 allows a flag group such as ``(?i)`` in the middle of a pattern, where it holds to the end
  of the enclosing group; ``re`` only at the very start. It becomes a scoped group
  ``(?i:...)`` closed where the enclosing group closes.
* ``\\z`` (end of text) is ``\\Z`` in ``re``.
* POSIX classes (``[[:alnum:]]``) are spelled out.
* RE2's ``\\w``, ``\\s``, ``\\d`` and ``\\b`` are ASCII; the caller compiles with ``re.ASCII``.
"""

from __future__ import annotations

_POSIX = {
    "alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "lower": "a-z", "upper": "A-Z",
    "space": r"\t\n\v\f\r ", "xdigit": "0-9A-Fa-f", "word": r"\w", "punct": r"!-/:-@\[-`{-~",
}


def translate(pattern: str) -> str:
    """``pattern`` (RE2 syntax) in Python's ``re`` syntax, matching the same texts."""
    out: list[str] = []
    # For every open group: how many scoped flag groups opened inside it still need closing.
    pending: list[int] = [0]
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            escape = pattern[index:index + 2]
            out.append(r"\Z" if escape == r"\z" else escape)
            index += 2
            continue
        if in_class:
            if pattern.startswith("[:", index):
                end = pattern.index(":]", index)
                out.append(_POSIX[pattern[index + 2:end]])
                index = end + 2
                continue
            in_class = char != "]"
            out.append(char)
        elif char == "[":
            in_class = True
            out.append(char)
            # A ']' right after '[' or '[^' is a literal member, not the class's end.
            for lead in ("^]", "]", "^"):
                if pattern.startswith(lead, index + 1):
                    out.append(lead)
                    index += len(lead)
                    break
        elif char == "(":
            flags = _flag_group(pattern, index)
            if flags is not None and (index > 0 or pending != [0]):
                out.append(f"(?{flags}:")
                pending[-1] += 1
                index += len(flags) + 3
                continue
            pending.append(0)
            out.append(char)
        elif char == ")":
            out.append(")" * pending.pop() + ")")
        else:
            out.append(char)
        index += 1
    out.append(")" * pending.pop())
    return "".join(out)


def _flag_group(pattern: str, index: int) -> str | None:
    """The flags of a bare flag group ``(?i)`` starting at ``index``, else None."""
    if not pattern.startswith("(?", index):
        return None
    end = pattern.find(")", index)
    flags = pattern[index + 2:end]
    return flags if end > 0 and flags and all(f in "imsU-" for f in flags) else None
