"""Structured output: the turn's answer is checked against its output type (an effect, so the
caller's own validators run), then the turn ends with the validated value, or the model is
told what did not match and asked again, a bounded number of times
(``SessionSettings.output_retries``), or the turn fails.

The answer is the text of a reply (the provider's structured output, or a model that answered
without the final-answer tool) or the arguments of a ``final_result`` call. Every way out
answers the calls of the reply, so the history keeps alternating.
"""

from __future__ import annotations

from stages.decision import Decision, Finish, PrepareCall
from stages.log.events import (
    ContinuationRequested,
    Event,
    SessionSettings,
    ToolCallRejected,
    TurnFinished,
)
from stages.log.messages import ToolCall, canonical_json
from stages.log.output_spec import FINAL_TOOL
from stages.log.state import State, TurnState
from stages.turn.step import answer_text

RETRY_PROMPT = ("Your answer does not match the required output schema:\n{errors}\n"
                "Give the whole answer again, corrected.")
TOOL_HINT = f" Call the {FINAL_TOOL} tool with the answer as its arguments."
RECEIVED = canonical_json({"ok": "final answer received"})
NOT_RUN = canonical_json({"error": "not run: the final answer was given"})


def _final_call(turn: TurnState) -> ToolCall | None:
    return next((c for c in turn.pending if c.name == FINAL_TOOL), None)


def output_candidate(state: State, stage: str) -> str | None:
    """The answer to check before ``stage`` decides, if the turn has an output type and the
    last reply gives one: a ``final_result`` call, or the text of an answer."""
    turn = state.turn
    if turn is None or turn.output is None or turn.finished is not None:
        return None
    if stage == "tool_plan":
        call = _final_call(turn)
        return None if call is None else call.arguments
    reply = turn.last_reply
    if stage != "answer" or reply is None or reply.finish_reason == "content_filter":
        return None
    return answer_text(state)


def _answered(turn: TurnState, final: ToolCall | None, content: str) -> tuple[Event, ...]:
    """A result for every call of the reply: the final answer's, and the others not run."""
    return tuple(ToolCallRejected(call=c, reason="final_result", content=content)
                 if c is final else
                 ToolCallRejected(call=c, reason="final_answer_given", content=NOT_RUN)
                 for c in turn.pending)


def decide_output(state: State, *, config: SessionSettings) -> Decision:
    """The turn's answer was checked (``OutputChecked``): finish with it, or ask again."""
    turn = state.turn
    assert turn is not None and turn.output_checked is not None
    checked, final = turn.output_checked, _final_call(turn)
    reply = turn.last_reply
    assert reply is not None
    if checked.valid:
        exit_reason = (FINAL_TOOL if final is not None
                       else f"text_response(finish_reason={reply.finish_reason})")
        return Decision(events=(*_answered(turn, final, RECEIVED), TurnFinished(
            exit_reason=exit_reason, final_response=checked.output,
            completed=not turn.budget_exhausted)), next=Finish())
    prompt = RETRY_PROMPT.format(errors=checked.errors or "not valid JSON")
    if (turn.output_failures <= config.output_retries and not turn.budget_exhausted
            and turn.api_calls < config.max_turns):
        if final is not None:
            return Decision(events=_answered(turn, final, canonical_json({"error": prompt})),
                            next=PrepareCall())
        # The final-answer tool was offered (``stages.turn.request``) but answered in text.
        offered = bool(state.tools) or config.output_mode == "tool"
        text = prompt + TOOL_HINT if offered else prompt
        return Decision(events=(ContinuationRequested(prompt=text, why="output"),),
                        next=PrepareCall())
    error = (f"the answer does not match the output type after {turn.output_failures} "
             f"tries: {checked.errors}")
    answer = final.arguments if final is not None else (
        None if reply.message.content is None else reply.message.text)
    return Decision(events=(*_answered(turn, final, canonical_json({"error": prompt})),
                            TurnFinished(exit_reason="output_invalid", final_response=answer,
                                         completed=False, failed=True, error=error)),
                    next=Finish())
