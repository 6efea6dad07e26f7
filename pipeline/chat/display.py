"""What the chat shows, as one small interface: the terminal (``render.RichDisplay``) and
plain output for scripts (``PlainDisplay``) implement it. Calls may come from several threads
(the turn, the model call's stream, subagents): implementations serialise them."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Protocol, TextIO

from pipeline.chat.text import collapsed
from pipeline.printable import printable

__all__ = ["Display", "PlainDisplay"]


class Display(Protocol):
    def begin_turn(self) -> None:
        """A turn starts (the spinner shows until something else does)."""

    def waiting(self) -> None:
        """A model call is in flight."""

    def delta(self, text: str) -> None:
        """A piece of the streamed answer."""

    def reply_text(self, text: str) -> None:
        """A whole reply's text that did not stream."""

    def reply_done(self) -> None:
        """The reply's text is complete."""

    def tool_started(self, name: str, summary: str, *, depth: int, label: str) -> None: ...

    def tool_finished(self, name: str, *, ok: bool, error: str | None, duration_ms: float,
                      output: str, depth: int, label: str) -> None: ...

    def notice(self, text: str, level: str = "info", *, depth: int = 0,
               label: str = "") -> None:
        """A line about the session: ``info``, ``warn``, ``error`` or ``dim``."""

    def end_turn(self, line: str | None) -> None:
        """The turn ended; ``line`` is its usage line."""

    def text(self, text: str) -> None:
        """A command's output."""

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None: ...

    def pause(self) -> None:
        """Stop live output: a question is asked inline."""

    def resume(self) -> None: ...


def _prefix(depth: int, label: str) -> str:
    return "  " * depth + (f"[{label}] " if label else "")


class PlainDisplay:
    """Plain text, for pipes: the answers on ``out`` (so a script reads only them), tool lines,
    notices and the usage line on ``err``."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._lock = threading.RLock()
        self._open_line = False  # the answer's last line has no newline yet

    def _write(self, stream: TextIO, text: str) -> None:
        with self._lock:
            stream.write(printable(text))
            stream.flush()

    def _line(self, stream: TextIO, text: str) -> None:
        with self._lock:
            if self._open_line:
                self._write(self.out, "\n")
                self._open_line = False
            self._write(stream, text + "\n")

    def begin_turn(self) -> None:
        self._open_line = False

    def waiting(self) -> None:
        pass

    def delta(self, text: str) -> None:
        with self._lock:
            self._write(self.out, text)
            self._open_line = not text.endswith("\n") if text else self._open_line

    def reply_text(self, text: str) -> None:
        self.delta(text)

    def reply_done(self) -> None:
        with self._lock:
            if self._open_line:
                self._write(self.out, "\n")
                self._open_line = False

    def tool_started(self, name: str, summary: str, *, depth: int, label: str) -> None:
        self._line(self.err, f"  {_prefix(depth, label)}[tool] {name} {summary}".rstrip())

    def tool_finished(self, name: str, *, ok: bool, error: str | None, duration_ms: float,
                      output: str, depth: int, label: str) -> None:
        status = "ok" if ok else f"error: {error}"
        self._line(self.err, f"  {_prefix(depth, label)}[tool] {name} -> {status} "
                             f"({duration_ms:.0f} ms)")
        del output  # a script reads the answer; the log keeps the whole output

    def notice(self, text: str, level: str = "info", *, depth: int = 0,
               label: str = "") -> None:
        tag = "" if level in ("info", "dim") else f"{level}: "
        # Nested lines line up with the tool lines they sit among.
        indent = f"  {_prefix(depth, label)}" if depth else ""
        self._line(self.err, f"{indent}{tag}{text}")

    def end_turn(self, line: str | None) -> None:
        self.reply_done()
        if line:
            self._line(self.err, f"[{line}]")

    def text(self, text: str) -> None:
        self._line(self.out, text)

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        cells = [["" if v is None else str(v) for v in row] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        for row in (list(columns), *cells):
            self.text("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass


def preview(output: str) -> list[str]:
    """A tool's output as the terminal shows it: its first lines, the rest counted."""
    shown, more = collapsed(output)
    return shown + ([f"… {more} more line{'s' if more != 1 else ''}"] if more else [])
