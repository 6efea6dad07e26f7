"""The interactive chat on a terminal: prompt_toolkit reads (multi-line input, history across
runs in ``<home>/chat_history``, completion of slash commands), rich shows
(``render.RichDisplay``). Both are imported here, lazily (the ``chat`` extra).

Keys: Enter sends, Esc Enter or Ctrl-J adds a line; Ctrl-C interrupts a running turn, clears a
typed line, and at an empty prompt right after an interrupt (or another Ctrl-C) ends the chat;
Ctrl-D ends it. While a turn runs the input line stays open (``pipeline.chat.steerline``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.chat import slash
from pipeline.chat.inline import APPROVAL_KEYS, Question, approval_choice, clarify_answer
from pipeline.printable import printable

if TYPE_CHECKING:
    from rich.console import Console

    from pipeline.chat.session import ChatSession

__all__ = ["Terminal", "interactive"]

HISTORY_FILE = "chat_history"
PROMPT = "> "
AGAIN_TO_EXIT = "(Ctrl-C again, or Ctrl-D, to exit)"


def _bindings() -> Any:
    from prompt_toolkit.key_binding import KeyBindings
    keys = KeyBindings()

    @keys.add("enter")
    def _send(event: Any) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        if state is not None and state.current_completion is not None:
            buffer.apply_completion(state.current_completion)
            return
        buffer.validate_and_handle()

    @keys.add("escape", "enter")
    @keys.add("c-j")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _cancel(event: Any) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return keys


def _completer() -> Any:
    from prompt_toolkit.completion import Completer, Completion

    class SlashCompleter(Completer):
        def get_completions(self, document: Any, complete_event: Any) -> Any:
            text = document.text_before_cursor
            if not text.startswith("/") or " " in text or "\n" in text:
                return
            for name in slash.names():
                if name.startswith(text):
                    entry = slash.COMMANDS[name[1:]]
                    yield Completion(name, start_position=-len(text), display_meta=entry.help)

    return SlashCompleter()


class Terminal:
    """The prompts: the user's next message, and the inline questions of a turn."""

    def __init__(self, session_home: Any, console: Console) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        session_home.mkdir(parents=True, exist_ok=True)
        self.console = console
        self.prompts: Any = PromptSession(
            history=FileHistory(str(session_home / HISTORY_FILE)), completer=_completer(),
            complete_while_typing=True, multiline=True, key_bindings=_bindings(),
            prompt_continuation=lambda width, line, wrap: "… ".rjust(width))
        self.answers: Any = PromptSession()
        self.draft = ""  # typed while the last turn ran, not sent: the next prompt starts with it

    def read(self) -> str:
        default, self.draft = self.draft, ""
        return str(self.prompts.prompt(PROMPT, default=default))

    def ask(self, question: Question) -> str | None:
        """An approval (once / session / always / deny) or a ``clarify`` question."""
        from rich.text import Text
        if question.request is not None:
            r = question.request
            self.console.print(Text("⚠ the model wants to run ", style="yellow")
                               + Text(printable(r.command), style="bold")
                               + Text(f"  ({printable(r.description)})", style="yellow"))
            keys = " / ".join(f"[{k}]{v[1:]}" for k, v in APPROVAL_KEYS.items())
            return approval_choice(str(self.answers.prompt(f"allow? {keys}: ")))
        self.console.print(Text("? ", style="cyan") + Text(printable(question.text),
                                                           style="bold"))
        for number, choice in enumerate(question.choices, 1):
            self.console.print(Text(f"  {number}. {printable(choice)}"))
        return clarify_answer(str(self.answers.prompt("answer: ")), question.choices)


def interactive(session: ChatSession, terminal: Terminal) -> int:
    """Read and run until /exit, Ctrl-D, or a second Ctrl-C at an empty prompt."""
    armed = False  # a Ctrl-C at the empty prompt now ends the chat
    while not session.ended:
        try:
            line = terminal.read()
        except KeyboardInterrupt:
            if armed or session.ended:
                return 0
            armed = True
            session.display.notice(AGAIN_TO_EXIT, "dim")
            continue
        except EOFError:
            return 0
        armed = False
        try:
            if not session.handle(line):
                return 0
        except KeyboardInterrupt:  # a slash command cut short (a turn handles its own)
            session.display.notice("cancelled", "warn")
        armed = session.interrupted
    return 0
