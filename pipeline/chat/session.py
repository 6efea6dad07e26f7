"""One chat: the agent of the current session, its turns, and what the user types.

A turn runs on a worker thread while the main thread, which owns the terminal, waits for it:
it asks the inline questions (approvals, ``clarify``), turns Ctrl-C into an interrupt of
the turn (which then ends cleanly, with an event, and the session stays resumable), and on a
terminal reads the lines typed meanwhile (``pipeline.chat.steering``: they steer the turn).

The MCP servers config.toml declares start with the chat, before its first agent (the model
sees their tools from the first request), serve every agent the chat builds, and stop when
the chat closes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TypeVar

from pipeline import config as cfg
from pipeline.agent import Agent
from pipeline.chat import slash
from pipeline.chat.attachments import image_paths
from pipeline.chat.display import Display
from pipeline.chat.inline import Inbox, Question, decide_inline
from pipeline.chat.listen import EventRouter
from pipeline.chat.options import ChatOptions
from pipeline.chat.steering import TurnInput, dispatch, perform
from pipeline.chat.text import turn_line
from pipeline.insights.prices import price_table
from pipeline.mcp_config import configured_mcp_tools
from pipeline.result import TurnResult
from stages.errors import MibyanError

__all__ = ["Asker", "ChatSession"]

# Asks one inline question on the terminal; None: no answer (deny, or a clarify error).
Asker = Callable[[Question], str | None]
WAIT_SLICE = 0.05
T = TypeVar("T")


class ChatSession:
    """``asker`` asks inline questions; without one (no terminal) dangerous commands are
    denied and ``clarify`` is not offered. ``typing`` reads lines while a turn runs; without
    it (no terminal) nothing is read until the turn ends."""

    def __init__(self, options: ChatOptions, display: Display,
                 asker: Asker | None = None, typing: TurnInput | None = None) -> None:
        self.options = options
        self.display = display
        self.asker = asker
        self.typing = typing
        self.router = EventRouter(display)
        self.inbox = Inbox()
        self.model = options.model
        # config.toml's [prices] as insights reads them, so both tell the same cost.
        self.prices = price_table(cfg.load_file(options.state_home))
        self.last: TurnResult | None = None
        self.failed_turns = 0
        self.interrupted = False  # the last turn was interrupted (a Ctrl-C at the prompt exits)
        self.ended = False  # the chat ends after what runs now (a SIGTERM)
        self.mcp = None if options.no_tools else configured_mcp_tools(
            options.state_home, options.workdir, options.sandbox)
        try:
            self.agent = self._build(options.session_id, self.model)
        except BaseException:
            self._stop_servers()
            raise

    # --- the current session's agent --------------------------------------------------------
    def _build(self, session_id: str | None, model: str | None) -> Agent:
        from pipeline.chat.build import build_agent
        return build_agent(self.options, model=model, session_id=session_id,
                           router=self.router, inbox=self.inbox if self.asker else None,
                           mcp=self.mcp or ())

    @property
    def session_id(self) -> str | None:
        return self.agent.session_id

    @property
    def home(self) -> Path:
        return self.agent.home

    def switch(self, session_id: str | None, model: str | None = None) -> None:
        """Go on in another session (None: a new one), or with another model; when the new
        agent cannot be built, the current one stays."""
        model = self.model if model is None else model
        agent = self._build(session_id, model)
        self.agent.close()
        self.agent, self.model, self.last = agent, model, None

    def close(self) -> None:
        try:
            self.agent.close()
        finally:
            self._stop_servers()

    def _stop_servers(self) -> None:
        if self.mcp is not None:
            self.mcp.close()

    def __enter__(self) -> ChatSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- input ------------------------------------------------------------------------------
    def handle(self, line: str) -> bool:
        """A slash command or a message (``//`` sends a message starting with ``/``); False
        when the chat should end."""
        text = line.strip()
        if not text:
            return True
        if text.startswith("/") and not text.startswith("//"):
            return slash.run(self, text)
        self.send(text[1:] if text.startswith("//") else line.strip("\n"))
        return True

    # --- a turn -----------------------------------------------------------------------------
    def send(self, message: str) -> TurnResult | None:
        """Run a turn and show it; None when it could not run (the error is shown)."""
        self.interrupted = False
        started = time.monotonic()
        images = image_paths(message, self.agent.agent_settings.cwd or Path.cwd())
        result = self.in_worker(lambda agent: self._turn(agent, message, images), steer=True)
        if result is None:
            self.failed_turns += 1
            return None
        self.display.end_turn(turn_line(result, time.monotonic() - started, self.prices))
        self.last, self.interrupted = result, result.interrupted
        self.failed_turns += result.failed
        return result

    def _turn(self, agent: Agent, message: str, images: Sequence[Path]) -> TurnResult:
        """A turn the session paused for approvals (elsewhere: the chat itself asks inline
        as calls come) goes on with answers asked inline first; then the message's turn."""
        if pending := agent.pending_approvals:
            resumed = agent.resume(decide_inline(self.inbox, pending),
                                   stream_callback=self.router.delta)
            if resumed.paused:
                return resumed
        return agent.run(message, system_message=self.options.system,
                         stream_callback=self.router.delta, images=images)

    def in_worker(self, job: Callable[[Agent], T], *, steer: bool = False) -> T | None:
        """``job(agent)`` on a worker thread, with the spinner, inline questions and Ctrl-C
        as an interrupt; a ``MibyanError`` is shown and gives None. ``steer``: the job is a
        turn, which lines typed meanwhile steer (a slash command's job takes none)."""
        agent, outcome = self.agent, list[T | BaseException]()
        typing = self.typing if steer else None

        def work() -> None:
            try:
                outcome.append(job(agent))
            except BaseException as exc:
                outcome.append(exc)

        with typing.during() if typing is not None else nullcontext():
            self.display.begin_turn()
            worker = threading.Thread(target=work, name="mibyan-chat-turn", daemon=True)
            worker.start()
            self._wait(worker, agent, typing)
        result = outcome[0]
        if isinstance(result, BaseException):
            self.display.end_turn(None)
            if not isinstance(result, MibyanError):
                raise result
            self.display.notice(f"{type(result).__name__}: {result}", "error")
            return None
        return result

    def _wait(self, worker: threading.Thread, agent: Agent, typing: TurnInput | None) -> None:
        """Until the turn ends: ask its questions, send what is typed into it; Ctrl-C
        interrupts it."""
        def done() -> bool:
            return not worker.is_alive() or self.inbox.waiting()

        while worker.is_alive():
            try:
                question = self.inbox.next(0 if typing is not None else WAIT_SLICE)
                if question is not None:
                    self._answer(question)
                elif typing is not None and (typed := typing.read(done)) is not None:
                    perform(dispatch(typed), agent, self.display)
            except KeyboardInterrupt:
                self.display.notice("interrupting…", "warn")
                agent.interrupt()
                self.inbox.cancel_all()
        worker.join()

    def _answer(self, question: Question) -> None:
        answer = None
        self.display.pause()
        try:
            answer = self.asker(question) if self.asker is not None else None
        finally:
            question.reply(answer)  # a Ctrl-C while asking: no answer, and the turn stops
            self.display.resume()
