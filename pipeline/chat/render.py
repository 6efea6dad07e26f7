"""The terminal display (rich): the answer rendered as markdown block by block as it streams
(code highlighted once its block is complete; the block still arriving shows as plain text
under it), tool calls as they start and finish, a spinner while the model is working.

While a turn runs with the input line open (:meth:`RichDisplay.below_prompt`), rich's live
area cannot share the screen with prompt_toolkit's: the spinner and the block still arriving
are then drawn by the input line itself, above it (:meth:`RichDisplay.live_ansi`), and what is
printed goes above both.

``rich`` is imported when the display is built (the ``chat`` extra)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pipeline.chat.blocks import BlockSplitter
from pipeline.chat.display import preview
from pipeline.printable import printable

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

__all__ = ["CODE_THEME", "RichDisplay"]

CODE_THEME = "monokai"
STYLES = {"info": "cyan", "warn": "yellow", "error": "bold red", "dim": "dim",
          "steered": "magenta"}
WAITING = "waiting for the model… (Ctrl-C interrupts)"


def _indent(depth: int, label: str) -> str:
    return "  " + "│ " * depth + (f"[{label}] " if label else "")


class RichDisplay:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._lock = threading.RLock()
        self._splitter = BlockSplitter()
        self._live: Live | None = None
        self._waiting = False
        self._in_turn = False
        self._blocks = 0  # blocks of the current reply printed so far
        self._prompted = False  # the input line draws the live area (no rich Live)

    # --- the live area under the output (spinner, or the block still arriving) --------------
    def _renderable(self) -> RenderableType:
        from rich.spinner import Spinner
        from rich.text import Text
        pending = self._splitter.pending
        if pending.strip():
            return Text(pending)
        if self._waiting:
            return Spinner("dots", text=Text(WAITING, style="dim"))
        return Text("")

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._renderable(), refresh=True)

    def _start_live(self) -> None:
        from rich.live import Live
        if self._live is None and not self._prompted and self.console.is_terminal:
            self._live = Live(self._renderable(), console=self.console, transient=True,
                              refresh_per_second=10)
            self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @contextmanager
    def below_prompt(self) -> Iterator[None]:
        """While an input line is on the screen: it shows the live area (``live_ansi``)."""
        with self._lock:
            self._stop_live()
            self._prompted = True
        try:
            yield
        finally:
            with self._lock:
                self._prompted = False

    def live_ansi(self, max_lines: int) -> str:
        """The live area as ANSI text, its last ``max_lines`` lines ("": nothing to show)."""
        with self._lock:
            if not self._in_turn or not (self._waiting or self._splitter.pending.strip()):
                return ""
            with self.console.capture() as captured:
                self.console.print(self._renderable(), end="")
        return "\n".join(captured.get().rstrip("\n").split("\n")[-max_lines:])

    def _markdown(self, block: str) -> None:
        from rich.markdown import Markdown
        if self._blocks:
            self.console.print()
        self._blocks += 1
        self.console.print(Markdown(block, code_theme=CODE_THEME))

    # --- Display ----------------------------------------------------------------------------
    def begin_turn(self) -> None:
        with self._lock:
            self._in_turn, self._waiting, self._blocks = True, True, 0
            self._start_live()

    def waiting(self) -> None:
        with self._lock:
            self._waiting = True
            self._refresh()

    def delta(self, text: str) -> None:
        with self._lock:
            self._waiting = False
            for block in self._splitter.feed(printable(text)):
                self._markdown(block)
            self._refresh()

    def reply_text(self, text: str) -> None:
        self.delta(text)

    def reply_done(self) -> None:
        with self._lock:
            rest = self._splitter.flush()
            if rest.strip():
                self._markdown(rest)
            self._blocks = 0
            self._refresh()

    def tool_started(self, name: str, summary: str, *, depth: int, label: str) -> None:
        from rich.text import Text
        name, summary, label = printable(name), printable(summary), printable(label)
        line = Text(_indent(depth, label)) + Text("⚙ ", style="cyan") + Text(name, style="bold")
        if summary:
            line += Text(f"  {summary}", style="dim")
        self._print(line, soft_wrap=True)

    def tool_finished(self, name: str, *, ok: bool, error: str | None, duration_ms: float,
                      output: str, depth: int, label: str) -> None:
        from rich.text import Text
        name, output, label = printable(name), printable(output), printable(label)
        mark = Text("✓ ", style="green") if ok else Text("✗ ", style="red")
        line = Text(_indent(depth, label)) + mark + Text(name, style="bold")
        if not ok:
            line += Text(f"  {printable(error or '')}", style="red")
        line += Text(f"  {duration_ms:,.0f} ms", style="dim")
        lines: list[Any] = [line]
        if not depth and output.strip():
            lines += [Text(f"{_indent(depth, label)}  {shown}", style="dim")
                      for shown in preview(output)]
        self._print(*lines, soft_wrap=True)

    def notice(self, text: str, level: str = "info", *, depth: int = 0,
               label: str = "") -> None:
        from rich.text import Text
        text, label = printable(text), printable(label)
        self._print(Text(_indent(depth, label) + text if depth or label else text,
                         style=STYLES.get(level, "")), soft_wrap=True)

    def end_turn(self, line: str | None) -> None:
        from rich.text import Text
        with self._lock:
            self.reply_done()
            self._in_turn = self._waiting = False
            self._stop_live()
            if line:
                self.console.print(Text(printable(line), style="dim"), soft_wrap=True)

    def text(self, text: str) -> None:
        from rich.text import Text
        self._print(Text(printable(text)))  # wrapped between words

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text
        table = Table(*columns, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for row in rows:  # Text: "[id]" is no markup
            table.add_row(*(Text("" if v is None else printable(str(v))) for v in row))
        self._print(table)

    def pause(self) -> None:
        with self._lock:
            self._stop_live()

    def resume(self) -> None:
        with self._lock:
            if self._in_turn:
                self._start_live()

    def _print(self, *renderables: Any, soft_wrap: bool = False) -> None:
        """``soft_wrap``: the terminal wraps the line (a copy of it is one line)."""
        with self._lock:
            # Text before a tool line is done: it belongs above it.
            rest = self._splitter.flush()
            if rest.strip():
                self._markdown(rest)
            for renderable in renderables:
                self.console.print(renderable, soft_wrap=soft_wrap)
            self._refresh()
