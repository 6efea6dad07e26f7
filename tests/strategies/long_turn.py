"""One user turn of many tool calls on a small window, in the pure simulation
(``tests.strategies.simulation``): the scripted model refuses a request larger than its window
as a real server does (a 400 naming the window), and the summariser writes an update that
moves the work forward (a Done item per compression, the next batch in progress).

``long_turn`` builds the script; ``run_long_turn`` drives it through the real session machine and
returns the driver, whose logs hold every event of the session and of its split children.
"""

from __future__ import annotations

import re

import attrs

from stages import decision as d
from stages.log import events as ev
from stages.log.context_tokens import CHARS_PER_TOKEN
from stages.session.machine import Opening, Turn
from tests.strategies.answers import Play
from tests.strategies.scripts import CallStep, ReplyStep, SessionScript, TurnScript
from tests.strategies.simulation import Driver, history, settings_of

__all__ = ["WindowedPlay", "long_turn", "request_tokens", "run_long_turn", "summary_update"]

FINAL = "all done"


def long_turn(replies: int, *, result_chars: int = 300, window: int = 4_000,
              user: str = "do the long task", batches: tuple[int, ...] = (1,),
              history: tuple[tuple[str, str], ...] | None = None) -> SessionScript:
    """One turn (after ``history``): ``replies`` replies of ``read`` calls (as many as
    ``batches`` says, cycled), each result about ``result_chars`` long, then the answer."""
    steps = tuple(ReplyStep(content=f"step {n}", calls=tuple(CallStep(
        name="read", arguments=f'{{"path":"{"p" * result_chars}{n}.{k}"}}')
        for k in range(batches[n % len(batches)]))) for n in range(replies))
    return SessionScript(max_turns=replies + 5, context_length=window, history=history,
                         turns=(TurnScript(user=user, steps=(*steps, ReplyStep(content=FINAL))),))


def request_tokens(request: d.ModelRequest) -> int:
    """The request's size as the window counts it: messages, system prompt and tools."""
    chars = sum(m.chars for m in request.messages) + len(request.system_prompt or "")
    return (chars + sum(len(spec.wire) for spec in request.tools)) // CHARS_PER_TOKEN


def summary_update(request: d.ModelRequest, count: int) -> str:
    """The ``count``-th summary: the steps it saw are done, the next one is in progress."""
    text = "".join(m.content or "" for m in request.messages)
    steps = [int(n) for n in re.findall(r"step (\d+)", text)]
    last = max(steps, default=-1)
    return (f"## Goal\n- the long task\n## Done\n- steps up to {last} (summary {count})\n"
            f"## In Progress\n- step {last + 1}\n## Facts\n- f\n## Open Questions\n- none")


@attrs.define
class WindowedPlay(Play):
    """A turn's answers from a model with a real window: a request over it is refused (the
    script's step is not used), a summary request gets ``summary_update``."""

    window: int = 4_000
    failing: tuple[bool, ...] = (False,)
    """Whether each summary call fails, cycled."""
    refused: int = 0
    summaries: int = 0
    largest: int = 0
    """The largest request the model accepted, in tokens."""

    def answer(self, effect: d.Effect, driver: Driver) -> tuple[ev.Event, ...]:
        if isinstance(effect, d.Summarise):
            self.summaries += 1
            if self.failing[(self.summaries - 1) % len(self.failing)]:
                return (ev.SummaryFailed(error_type="ProviderHTTPError", message="overloaded"),)
            return (ev.ContextSummarised(text=summary_update(effect.request, self.summaries),
                                         model="m"),)
        if isinstance(effect, d.CallModel):
            tokens = request_tokens(effect.request)
            if tokens > self.window:
                self.refused += 1
                return (ev.ModelFailed(
                    error_type="ProviderHTTPError", status=400,
                    message=(f"This model's maximum context length is {self.window} tokens. "
                             f"However, your messages resulted in {tokens} tokens."),
                    body='{"error":{"code":"context_length_exceeded"}}'),)
            self.largest = max(self.largest, tokens)
        return super().answer(effect, driver)


def run_long_turn(script: SessionScript, *, failing: tuple[bool, ...] = (False,),
                  driver_type: type[Driver] = Driver) -> tuple[Driver, WindowedPlay]:
    """The script's one turn through the session machine, against a windowed model whose
    summary calls fail as ``failing`` says."""
    config = settings_of(script)
    driver = driver_type(settings=config)
    driver.open(Opening(settings=config, session_id="s", tools=driver.tools))
    (turn,) = script.turns
    assert script.context_length is not None
    play = WindowedPlay(index=0, script=turn, window=script.context_length, failing=failing)
    driver.consumed.append(play.used)
    driver.command(Turn(user_message=turn.user, system_message=None,
                        history=history(script.history)), play)
    driver.end()
    return driver, play
