"""The window an overflow teaches (``stages.log.context_tokens.overflow_cap``): the limit the
provider's refusal names, in OpenAI's, Anthropic's and llama.cpp's words, else a tenth under
the request that failed. Before rules 8 only OpenAI's wording was read; a long turn on a
window named another way then compressed about twice as often as it needed to (the
long-turn scenario's figures in ``docs/context.md``)."""

from __future__ import annotations

import json

import attrs
import pytest

from stages.log import events as ev
from stages.recovery.chain import decide_recovery
from tests.stages.helpers import SETTINGS, answered, reply, session, then, turn

BIG = attrs.evolve(SETTINGS, context_length=200_000, max_turns=50)
# The real bodies (tests/corpus/errors/), with a 4,000-token window.
LLAMACPP = json.dumps({"error": {
    "code": 400, "message": "the request exceeds the available context size, try increasing it",
    "type": "exceed_context_size_error", "n_prompt_tokens": 4075, "n_ctx": 4000}})
ANTHROPIC = json.dumps({"type": "error", "error": {
    "type": "invalid_request_error", "message": "prompt is too long: 4028 tokens > 4000 maximum"}})
ANTHROPIC_WITH_OUTPUT = json.dumps({"type": "error", "error": {
    "type": "invalid_request_error", "message": "input length and `max_tokens` exceed context "
    "limit: 3100 + 1000 > 4,000, decrease input length or `max_tokens` and try again"}})
OPENAI = json.dumps({"error": {
    "message": "This model's maximum context length is 4000 tokens. However, your messages "
    "resulted in 4100 tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
RESPONSES = json.dumps({"error": {
    "message": "Your input exceeds the context window of this model. Please adjust your input "
    "and try again.", "type": "invalid_request_error", "param": "input",
    "code": "context_length_exceeded"}})


def _cap_after(body: str, message: str, *, rules: int | None = None) -> int | None:
    settings = BIG if rules is None else attrs.evolve(BIG, rules=rules)
    state = session(settings=settings)
    for n in range(4):  # about 3,600 tokens of history: the rough estimate of the request
        state = turn(state, f"q{n} " + "q" * 1_800, index=n)
        state = answered(state, reply(f"a{n} " + "a" * 1_800))
        state = then(state, ev.TurnFinished(exit_reason="x", final_response="a", completed=True))
    state = turn(state, "latest question", index=99)
    state = then(state, ev.ModelRequested(call_index=0, purpose="step", model="m", provider="p",
                                          message_count=1, tool_count=0, estimated_tokens=0),
                 ev.ModelFailed(error_type="ProviderHTTPError", status=400, message=message,
                                body=body))
    decision = decide_recovery(state, config=settings)
    assert decision.events[0].action == "compress"
    return then(state, decision).context.window_cap


@pytest.mark.parametrize(("body", "message"), [
    (LLAMACPP, "400: the request exceeds the available context size, try increasing it"),
    (ANTHROPIC, "invalid_request_error: prompt is too long: 4028 tokens > 4000 maximum"),
    (ANTHROPIC_WITH_OUTPUT, "invalid_request_error: input length and `max_tokens` exceed "
     "context limit: 3100 + 1000 > 4,000, decrease input length or `max_tokens` and try again"),
    (OPENAI, "context_length_exceeded: This model's maximum context length is 4000 tokens."),
], ids=["llamacpp", "anthropic", "anthropic-with-output", "openai"])
def test_the_window_a_refusal_names_is_learned_exactly(body: str, message: str) -> None:
    assert _cap_after(body, message) == 4_000


def test_a_refusal_naming_no_window_caps_a_tenth_under_the_failed_request() -> None:
    cap = _cap_after(RESPONSES, "context_length_exceeded: Your input exceeds the context window")
    assert cap is not None and 3_000 < cap < 3_600


def test_before_rules_8_only_openais_wording_was_read() -> None:
    assert _cap_after(OPENAI, "maximum context length is 4000 tokens", rules=7) == 4_000
    cap = _cap_after(LLAMACPP, "400: the request exceeds the available context size", rules=7)
    assert cap is not None and cap < 3_600
