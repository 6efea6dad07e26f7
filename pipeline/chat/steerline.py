"""The terminal's input line while a turn runs (prompt_toolkit, the ``chat`` extra): what the
turn prints goes above it (``patch_stdout``), the spinner and the block still arriving are
drawn just above it (``RichDisplay.live_ansi``), and a line typed there steers the turn
(``pipeline.chat.steering``).

Keys: Enter steers, Esc sends the line now (interrupting the running step), Esc Enter or
Ctrl-J adds a line, Ctrl-C interrupts the turn (the line typed so far stays), Ctrl-D does
nothing while a turn runs. What is still typed when the turn ends is on the next prompt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pipeline.chat.steering import Typed
from pipeline.chat.terminal import PROMPT

if TYPE_CHECKING:
    from pipeline.chat.render import RichDisplay
    from pipeline.chat.terminal import Terminal

__all__ = ["SteerLine"]

HINT = "type to steer · Enter: after this step · Esc: now · Ctrl-C interrupts"
WATCH_SLICE = 0.05  # how soon the line gives way to a question, or to the next prompt
REFRESH = 0.1  # the spinner's frame rate, as rich's live area had it
KEPT_ROWS = 4  # rows the live area leaves to the input line


class SteerLine:
    def __init__(self, terminal: Terminal, display: RichDisplay) -> None:
        self.terminal = terminal
        self.display = display
        self.prompts: Any = None  # built at the first turn: the chat starts as fast as before

    def _session(self) -> Any:
        from prompt_toolkit import PromptSession
        # The chat's history: a steered line is recalled with Up like any other.
        return PromptSession(
            history=self.terminal.prompts.history, multiline=True,
            key_bindings=self._bindings(),
            erase_when_done=True,  # the transcript shows the line as steered, once
            prompt_continuation=lambda width, line, wrap: "… ".rjust(width))

    @contextmanager
    def during(self) -> Iterator[None]:
        from prompt_toolkit.patch_stdout import patch_stdout
        if self.prompts is None:  # before stdout is patched: it writes to the terminal
            self.prompts = self._session()
        with self.display.below_prompt(), patch_stdout(raw=True):
            yield

    def read(self, done: Callable[[], bool]) -> Typed | None:
        from prompt_toolkit.application import get_app
        from prompt_toolkit.formatted_text import ANSI, FormattedText

        def message() -> Any:
            rows = get_app().output.get_size().rows
            live = self.display.live_ansi(max(1, rows - KEPT_ROWS))
            return ANSI(f"{live}\n{PROMPT}" if live else PROMPT)

        def watch() -> None:
            app = get_app()

            async def until_done() -> None:
                while not done():
                    await asyncio.sleep(WATCH_SLICE)
                if not app.is_done:
                    self.terminal.draft = app.current_buffer.text
                    app.exit(result=None)

            app.create_background_task(until_done())

        default, self.terminal.draft = self.terminal.draft, ""
        typed: Typed | None = self.prompts.prompt(
            message, default=default, pre_run=watch, refresh_interval=REFRESH,
            placeholder=FormattedText([("fg:ansibrightblack", HINT)]))
        return typed

    def _bindings(self) -> Any:
        from prompt_toolkit.key_binding import KeyBindings
        keys = KeyBindings()

        def send(event: Any, *, now: bool) -> None:
            buffer = event.current_buffer
            if buffer.text.strip():
                buffer.append_to_history()
                event.app.exit(result=Typed(buffer.text, now=now))

        @keys.add("enter")
        def _steer(event: Any) -> None:
            send(event, now=False)

        @keys.add("escape")
        def _now(event: Any) -> None:
            send(event, now=True)

        @keys.add("escape", "enter")
        @keys.add("c-j")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        @keys.add("c-c")
        def _interrupt(event: Any) -> None:
            self.terminal.draft = event.current_buffer.text
            event.app.exit(exception=KeyboardInterrupt())

        @keys.add("c-d")
        def _nothing(event: Any) -> None:
            """The chat ends at the prompt, not in the middle of a turn."""

        return keys
