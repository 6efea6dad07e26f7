"""Named examples for structured output's stages: what the request stage asks for
(``output_request``), where the turn machine checks an answer (``output_candidate``), and what
``decide_output`` does with the check."""

from __future__ import annotations

import json

import attrs
import pytest

from stages.decision import Finish, PrepareCall
from stages.fold import apply_event
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.output_spec import FINAL_TOOL, OutputSpec
from stages.log.state import State
from stages.turn.output import decide_output, output_candidate
from stages.turn.request import decide_request, output_request, request_digest
from stages.turn.step import next_stage
from tests.stages.helpers import SETTINGS, answered, call, reply, session, spec, then

SPEC = OutputSpec(name="City", schema='{"properties":{"name":{"type":"string"}},"type":"object"}')
TOOLS = (spec("read", read_only=True),)


def output_turn(state: State, output: OutputSpec | None = SPEC) -> State:
    return apply_event(state, ev.TurnStarted(turn_id="t", task_id="k", started_at="t1",
                                             user_message="which city?", output=output))


def checked(state: State, valid: bool, output: str | None = None,
            errors: str | None = None) -> State:
    return apply_event(state, ev.OutputChecked(valid=valid, output=output, errors=errors))


# --- the request ----------------------------------------------------------------------------------

def test_without_an_output_type_the_request_is_what_it_was():
    assert output_request(None, TOOLS, "auto", SETTINGS) == (TOOLS, "auto", None)
    state = output_turn(session(*TOOLS), None)
    request = decide_request(state, config=SETTINGS).next.request
    assert request.output is None and request.tools == TOOLS and request.tool_choice is None


def test_a_request_without_tools_asks_for_the_provider_s_structured_output():
    request = decide_request(output_turn(session()), config=SETTINGS).next.request
    assert request.output == SPEC and request.tools == () and request.tool_choice is None


def test_a_request_with_tools_offers_the_final_answer_tool_and_requires_a_call():
    request = decide_request(output_turn(session(*TOOLS)), config=SETTINGS).next.request
    assert request.output is None and request.tool_choice == "required"
    assert [t.name for t in request.tools] == ["read", FINAL_TOOL]
    assert json.loads(request.tools[-1].parameters) == json.loads(SPEC.schema)


def test_output_mode_tool_always_uses_the_tool():
    config = attrs.evolve(SETTINGS, output_mode="tool")
    tools, choice, native = output_request(SPEC, (), None, config)
    assert [t.name for t in tools] == [FINAL_TOOL] and choice == "required" and native is None


def test_the_digest_covers_the_schema_only_when_there_is_one():
    state = output_turn(session())
    request = decide_request(state, config=SETTINGS).next.request
    other = attrs.evolve(request, output=attrs.evolve(SPEC, name="Town"))
    plain = attrs.evolve(request, output=None)
    digests = {request_digest(r, "h") for r in (request, other, plain)}
    assert len(digests) == 3


# --- where the machine checks ------------------------------------------------------------------

def test_a_text_answer_and_a_final_result_call_are_candidates():
    state = answered(output_turn(session()), reply('{"name": "Oslo"}'))
    assert next_stage(state) == "answer" and output_candidate(state, "answer") == \
        '{"name": "Oslo"}'
    final = call("c1", FINAL_TOOL, '{"name":"Oslo"}')
    state = answered(output_turn(session(*TOOLS)), reply(None, call("c0", "read"), final))
    assert next_stage(state) == "tool_plan"
    assert output_candidate(state, "tool_plan") == '{"name":"Oslo"}'


def test_no_candidate_without_an_output_type_or_a_final_call():
    state = answered(output_turn(session(), None), reply("Oslo"))
    assert output_candidate(state, "answer") is None
    state = answered(output_turn(session(*TOOLS)), reply(None, call("c0", "read")))
    assert output_candidate(state, "tool_plan") is None


# --- deciding on the check ---------------------------------------------------------------------

def test_a_valid_final_call_ends_the_turn_answering_every_call():
    final = call("c1", FINAL_TOOL, '{"name":"Oslo"}')
    state = answered(output_turn(session(*TOOLS)), reply(None, final, call("c2", "read")))
    state = checked(state, True, '{"name":"Oslo"}')
    decision = decide_output(state, config=SETTINGS)
    assert isinstance(decision.next, Finish)
    *rejected, finished = decision.events
    assert [(r.call.id, r.reason) for r in rejected] == [("c1", "final_result"),
                                                         ("c2", "final_answer_given")]
    assert finished.final_response == '{"name":"Oslo"}' and finished.completed
    assert finished.exit_reason == FINAL_TOOL
    assert violations(then(state, decision).messages) == []


def test_an_invalid_text_answer_is_asked_again_with_the_errors():
    state = checked(answered(output_turn(session()), reply("Oslo")), False,
                    errors="the answer is not valid JSON")
    decision = decide_output(state, config=SETTINGS)
    assert isinstance(decision.next, PrepareCall)
    (again,) = decision.events
    assert again.why == "output" and "not valid JSON" in again.prompt
    after = then(state, decision)
    assert after.turn.continuations == 0  # not a continuation of a cut reply
    assert after.messages[-1].role == "user"


def test_an_invalid_final_call_gets_the_errors_as_its_result():
    final = call("c1", FINAL_TOOL, '{"name":5}')
    state = checked(answered(output_turn(session(*TOOLS)), reply(None, final)), False,
                    errors="name: 5 is not of type 'string'")
    decision = decide_output(state, config=SETTINGS)
    assert isinstance(decision.next, PrepareCall)
    (result,) = decision.events
    assert result.reason == "final_result" and "is not of type" in result.content


@pytest.mark.parametrize("retries", [0, 1])
def test_after_the_retries_the_turn_fails(retries):
    config = attrs.evolve(SETTINGS, output_retries=retries, max_turns=10)
    state = session(settings=config)
    state = output_turn(state)
    for _ in range(retries):
        state = checked(answered(state, reply("no")), False, errors="bad")
        state = then(state, decide_output(state, config=config))
    state = checked(answered(state, reply("still no")), False, errors="bad")
    decision = decide_output(state, config=config)
    (finished,) = decision.events
    assert isinstance(decision.next, Finish) and finished.failed
    assert finished.exit_reason == "output_invalid" and finished.final_response == "still no"
    assert f"after {retries + 1} tries" in finished.error
