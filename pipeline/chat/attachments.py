"""Images named in a chat message: ``@path/to/img.png``, or a path pasted (or dropped) into
the terminal, which pastes it whole, often quoted or with its spaces escaped.

An ``@`` mention is always taken as an image (a missing file is then a clear error and the
turn does not start); a bare path only when it is an image file that exists, so that text
that merely mentions ``cat.png`` is left alone. The message's text is kept as typed.
"""

from __future__ import annotations

import shlex
from pathlib import Path

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:  # an apostrophe in prose: no quoting to undo
        return text.split()


def image_paths(text: str, cwd: Path) -> tuple[Path, ...]:
    """The images ``text`` names, in order, each once."""
    found: dict[Path, None] = {}
    for token in _tokens(text):
        mention = token.startswith("@")
        name = token[1:] if mention else token
        name = name.rstrip(",;:!?)")  # "look at @a.png, then..." ends the path at the comma
        if not name.lower().endswith(IMAGE_SUFFIXES):
            continue
        path = Path(name).expanduser()
        path = path if path.is_absolute() else cwd / path
        if mention or path.is_file():
            found[path] = None
    return tuple(found)
