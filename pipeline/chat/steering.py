"""What the user types while a turn runs (the chat's input line stays open under the output).

As in Codex CLI: Enter steers (the line joins the conversation at the turn's next step boundary,
``Agent.steer``, so the model reads it in its very next request); Esc sends it now, stopping the
running step and going on with it (``Agent.interrupt(message)``); Ctrl-C alone interrupts, as
it always did. Slash commands wait for the prompt: only a message can join a running turn.

:func:`dispatch` decides; :func:`perform` does it on the turn's agent and says so in the
transcript, so the steered message shows where it was typed, marked as such.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

import attrs

if TYPE_CHECKING:
    from pipeline.agent import Agent
    from pipeline.chat.display import Display

__all__ = ["Ignore", "Interrupt", "Steer", "TurnInput", "Typed", "dispatch", "perform"]

# The transcript's mark of a message typed into a running turn (a notice of this level).
STEERED = "steered"
NOT_WHILE_RUNNING = ("{command} waits for the prompt: only a message joins a running turn "
                     "(// sends one that starts with /)")


@attrs.frozen
class Typed:
    """A line typed while a turn ran; ``now``: sent with Esc (interrupt and go on with it)."""

    text: str
    now: bool = False


@attrs.frozen
class Steer:
    text: str


@attrs.frozen
class Interrupt:
    message: str


@attrs.frozen
class Ignore:
    """Nothing is sent; ``notice`` (if any) says why."""

    notice: str = ""


class TurnInput(Protocol):
    """The input line while a turn runs (the terminal's: ``pipeline.chat.steerline``)."""

    def during(self) -> AbstractContextManager[None]:
        """Around a whole turn: the output goes above the input line."""

    def read(self, done: Callable[[], bool]) -> Typed | None:
        """The next line typed; None once ``done()`` (the turn ended, or a question waits to
        be asked). Ctrl-C raises ``KeyboardInterrupt``."""


def dispatch(typed: Typed) -> Steer | Interrupt | Ignore:
    """What a line typed into a running turn does (``//`` sends a message starting with /)."""
    text = typed.text.strip()
    if not text:
        return Ignore()
    if text.startswith("/") and not text.startswith("//"):
        return Ignore(NOT_WHILE_RUNNING.format(command=text.split()[0]))
    message = text[1:] if text.startswith("//") else typed.text.strip("\n")
    return Interrupt(message) if typed.now else Steer(message)


def perform(action: Steer | Interrupt | Ignore, agent: Agent, display: Display) -> None:
    # Sent first, shown after: once the line shows, the turn has it.
    if isinstance(action, Steer):
        agent.steer(action.text)
        display.notice(f"» {action.text}  (steered: the model reads it after this step)",
                       STEERED)
    elif isinstance(action, Interrupt):
        agent.interrupt(action.message)
        display.notice(f"» {action.message}  (interrupting: the turn goes on with it)", STEERED)
    elif action.notice:
        display.notice(action.notice, "warn")

