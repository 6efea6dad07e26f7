"""The parts of an ``Agent`` turn around the session machine: what the caller gave, taken in
before the session is touched; the command it becomes; the caller's sinks wired to the runner
for the turn's length; the result the caller gets back. ``Agent._turn`` drives the machine
between them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import attrs

from effects.images import BlobStore, ImageSource, image_part, message_parts, stored_message
from effects.masked_stream import MaskedStream
from effects.protocols import DeltaSink
from pipeline import output_types
from pipeline.client_tools import client_results, client_specs, unanswered
from pipeline.intake import HistoryIntake
from pipeline.output_types import OutputType
from pipeline.providers import Secrets
from pipeline.result import TurnResult
from pipeline.run_events import RunEvent, RunEvents
from pipeline.shell.decisions import Decisions, answers_for
from pipeline.shell.runner import SessionRunner
from pipeline.shell.waits import waiting
from stages.errors import UsageError
from stages.log.content_parts import ContentPart, ImagePart
from stages.log.events import Event
from stages.log.messages import Message
from stages.log.reasoning_parts import check_setting
from stages.log.state import State
from stages.log.tool_specs import ToolSpec
from stages.session.machine import Decide, Turn

__all__ = ["TakenIn", "both_listeners", "client_turn", "take_in", "turn_command",
           "turn_result", "wired"]

Listener = Callable[[Event], None]
_NOTHING = nullcontext()


@attrs.frozen(kw_only=True)
class TakenIn:
    """The caller's message, images (stored: the log holds references only), history and
    output type, checked and converted."""

    user_message: str | None
    images: tuple[ImagePart, ...]
    history: tuple[Message, ...] | None
    wanted: OutputType | None


def take_in(user_message: str | Sequence[Mapping[str, Any] | ContentPart] | None,
            conversation_history: Sequence[Mapping[str, Any]] | None, *,
            decisions: Decisions | None, images: Sequence[ImageSource], output_type: Any,
            reasoning_effort: str | None, reasoning_budget: int | None,
            store: BlobStore, intake: HistoryIntake) -> TakenIn:
    if reasoning_effort is not None or reasoning_budget is not None:  # None: none to check
        check_setting(reasoning_effort, reasoning_budget)
    if (user_message is None) == (decisions is None):
        raise UsageError("run() takes a user message, or decisions on pending approvals")
    wanted = None if output_type is None else output_types.output_type(output_type)
    taken: tuple[ImagePart, ...] = ()
    text = None
    if user_message is not None:
        text, parts = message_parts(user_message)
        if parts or images:
            taken = tuple(image_part(source, store) for source in (*parts, *images))
    history = None
    if conversation_history is not None:
        history, with_parts = intake.taken(conversation_history)
        if with_parts:  # only a message with parts can hold a data: URL image to store
            stored = list(history)
            for index in with_parts:
                stored[index] = stored_message(stored[index], store)
            history = tuple(stored)
    return TakenIn(user_message=text, images=taken, history=history, wanted=wanted)


def turn_command(state: State, taken: TakenIn, decisions: Decisions | None, *,
                 system_message: str | None, task_id: str | None,
                 reasoning_effort: str | None, reasoning_budget: int | None,
                 client_tools: Sequence[Mapping[str, Any] | ToolSpec],
                 tool_results: Sequence[Mapping[str, Any]]) -> Turn | Decide:
    """The command for the session in ``state``: decisions on its pending approvals, or a
    turn of the message (refused while approvals are pending)."""
    if decisions is not None:
        return Decide(answers=answers_for(waiting(state), decisions))
    assert taken.user_message is not None
    if pending := waiting(state):
        raise UsageError("the session waits for approvals of calls "
                         f"{', '.join(p.call_id for p in pending)}: resume(decisions) first")
    history = taken.history
    specs, results = client_turn(state, history, client_tools, tool_results)
    # The state's messages as a tuple (a C-speed copy): tuples compare at C speed, and an
    # identical message without a Python call.
    if history is not None and len(history) == len(state.messages) \
            and history == state.messages[:]:
        # A caller that passes the whole conversation each turn: nothing to replace, so
        # nothing is redacted, encoded and logged again.
        history = None
    return Turn(user_message=taken.user_message, system_message=system_message,
                history=history, task_id=task_id, reasoning_effort=reasoning_effort,
                reasoning_budget=reasoning_budget,
                output=None if taken.wanted is None else taken.wanted.spec,
                client_tools=specs, tool_results=results, images=taken.images)


def client_turn(state: State, history: tuple[Message, ...] | None,
                tools: Sequence[Mapping[str, Any] | ToolSpec],
                results: Sequence[Mapping[str, Any]]
                ) -> tuple[tuple[ToolSpec, ...], tuple[Message, ...]]:
    """The turn's client tools and results, checked: results answer exactly the calls the
    history leaves open, and a history with calls left open takes nothing else."""
    specs = client_specs(tools, [spec.name for spec in state.tools]) if tools else ()
    if (specs or results) and (state.settings is None
                               or not state.settings.rule_set.client_tools):
        raise UsageError("this session runs under rules older than 8, which have no "
                         "client tools; start a new session")
    waiting = unanswered(history if history is not None else state.messages)
    if not results and not waiting:
        return specs, ()
    return specs, client_results(results, waiting)


def wired(runner: SessionRunner, secrets: Secrets, wanted: OutputType | None, *,
          stream_callback: DeltaSink | None, reasoning_callback: DeltaSink | None,
          on_event: Callable[[RunEvent], object] | None) -> AbstractContextManager[None]:
    """The caller's sinks on ``runner`` while the turn runs, and taken off after it."""
    if on_event is None and stream_callback is None and reasoning_callback is None \
            and wanted is None:
        return _NOTHING  # a turn with none leaves the runner as it is
    return _wired(runner, secrets, wanted, on_event=on_event, stream_callback=stream_callback,
                  reasoning_callback=reasoning_callback)


@contextmanager
def _wired(runner: SessionRunner, secrets: Secrets, wanted: OutputType | None, *,
           stream_callback: DeltaSink | None, reasoning_callback: DeltaSink | None,
           on_event: Callable[[RunEvent], object] | None) -> Iterator[None]:
    events = text = reasoning = None
    if on_event is not None:
        events = RunEvents(on_event, secrets)
        text, reasoning = events.text_sink(), events.reasoning_sink()
    text = _tee(stream_callback, text)
    reasoning = _tee(reasoning_callback, reasoning)
    performers = runner.performers
    assert performers is not None
    # What streams is shown masked, as the log keeps it, and once.
    performers.on_delta = None if text is None else MaskedStream(text, secrets)
    performers.on_reasoning = None if reasoning is None else MaskedStream(reasoning, secrets)
    listener = runner.listener
    if events is not None:
        runner.on_ask = events.asked
        runner.listener = both_listeners(listener, events.logged)
    performers.output_check = None if wanted is None else wanted.check
    try:
        yield
    finally:
        performers.on_delta = performers.on_reasoning = None
        runner.on_ask, runner.listener = None, listener
        performers.output_check = None


def turn_result(state: State, wanted: OutputType | None) -> TurnResult:
    result = TurnResult.from_state(state)
    if wanted is not None and result.output is not None:
        result = attrs.evolve(result, output=wanted.value(result.output))
    return result


def _tee(first: DeltaSink | None, second: DeltaSink | None) -> DeltaSink | None:
    """One sink feeding both (either may be None)."""
    if first is None or second is None:
        return first or second

    def both(text: str) -> None:
        first(text)
        second(text)
    return both


def both_listeners(first: Listener | None, second: Listener) -> Listener:
    if first is None:
        return second

    def both(event: Event) -> None:
        first(event)
        second(event)
    return both
