"""Questions asked inline while a turn runs: the approval of a dangerous command and the
``clarify`` tool's questions. They come from the turn's threads; the main thread, which owns
the terminal, asks them (:meth:`Inbox.next`) and the asking thread waits for the answer."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence

import attrs

from effects.tools.workspace import ToolError
from pipeline.shell.approval import ApprovalRequest
from stages.log.pause_events import PendingApproval

__all__ = ["APPROVAL_KEYS", "Inbox", "Question", "approval_choice", "clarify_answer",
           "decide_inline"]

APPROVAL_KEYS = {"o": "once", "s": "session", "a": "always", "d": "deny"}
NOT_ANSWERED = "the user did not answer"


@attrs.define(eq=False)
class Question:
    """An approval (``request`` set) or a clarifying question (``text`` and ``choices``)."""

    request: ApprovalRequest | None = None
    text: str = ""
    choices: tuple[str, ...] = ()
    answer: str | None = None
    answered: threading.Event = attrs.field(factory=threading.Event)

    def reply(self, answer: str | None) -> None:
        self.answer = answer
        self.answered.set()


class Inbox:
    def __init__(self) -> None:
        self._questions: queue.Queue[Question] = queue.Queue()

    def next(self, timeout: float) -> Question | None:
        try:
            return self._questions.get(timeout=timeout)
        except queue.Empty:
            return None

    def waiting(self) -> bool:
        """A question waits to be asked."""
        return not self._questions.empty()

    def _ask(self, question: Question) -> str | None:
        self._questions.put(question)
        question.answered.wait()
        return question.answer

    def approve(self, request: ApprovalRequest) -> str:
        """The agent's approval callback (``pipeline.shell.approval``: it times the answer out)."""
        return self._ask(Question(request=request)) or "deny"

    def clarify(self, question: str, choices: Sequence[str]) -> str:
        """The ``clarify`` tool's callback."""
        answer = self._ask(Question(text=question, choices=tuple(choices)))
        if answer is None:
            raise ToolError(NOT_ANSWERED)
        return answer

    def cancel_all(self) -> None:
        """Answer what is still waiting with nothing (the turn is being interrupted)."""
        while (question := self.next(0)) is not None:
            question.reply(None)


def decide_inline(inbox: Inbox, pending: Sequence[PendingApproval]) -> dict[str, str]:
    """The decisions on a turn that waits for approvals (it paused in another process, the
    gateway or the library): each pending call asked inline, as a running turn's would be."""
    return {p.call_id: inbox.approve(ApprovalRequest(
        tool=p.tool, command=p.command, pattern=p.pattern, description=p.description))
        for p in pending}


def approval_choice(typed: str) -> str:
    """once / session / always from their first letter or name; anything else denies."""
    word = typed.strip().lower()
    if word in APPROVAL_KEYS.values():
        return word
    return APPROVAL_KEYS.get(word[:1], "deny")


def clarify_answer(typed: str, choices: Sequence[str]) -> str:
    """A choice's number picks it; anything else is the answer as typed."""
    text = typed.strip()
    if text.isdecimal() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    return text
