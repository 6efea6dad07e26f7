"""The lines run and fork print on stderr (issue 25): what each tool was asked, and a word
for each failed model call while it is retried, with no secret shown."""

from __future__ import annotations

from pipeline.cli.turn_lines import TurnLines
from stages.log.events import (
    ModelFailed,
    ModelReplied,
    RecoveryDecided,
    ToolCallRejected,
    ToolRan,
    Usage,
)
from stages.log.messages import Message, ToolCall
from stages.log.tool_specs import ToolOutcome

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8" * 3


def _replied(*calls: ToolCall) -> ModelReplied:
    return ModelReplied(message=Message(role="assistant", tool_calls=calls),
                        finish_reason="tool_calls", usage=Usage(), model="m", latency_ms=1.0)


def test_a_tool_line_says_what_the_tool_was_asked_and_how_it_went(capsys):
    lines = TurnLines()
    lines(_replied(ToolCall(id="c1", name="terminal", arguments='{"command": "ls -la"}'),
                   ToolCall(id="c2", name="write_file",
                            arguments='{"path": "a.txt", "content": "x"}')))
    lines(ToolRan(outcome=ToolOutcome(call_id="c2", name="write_file", content="ok", ok=True,
                                      duration_ms=3)))
    lines(ToolRan(outcome=ToolOutcome(call_id="c1", name="terminal", content="", ok=False,
                                      error="exit 2", duration_ms=12)))
    assert capsys.readouterr().err.splitlines() == [
        "  [tool] write_file a.txt -> ok (3 ms)",
        "  [tool] terminal ls -la -> error: exit 2 (12 ms)"]


def test_a_rejected_call_and_a_secret_in_the_arguments(capsys):
    lines = TurnLines()
    call = ToolCall(id="c1", name="terminal", arguments=f'{{"command": "echo {KEY}"}}')
    lines(_replied(call))
    lines(ToolCallRejected(call=call, reason="needs approval", content="denied"))
    err = capsys.readouterr().err
    assert "[tool] terminal echo" in err and "rejected: needs approval" in err
    assert KEY not in err


def test_a_failed_call_that_is_retried_is_said_on_stderr(capsys):
    lines = TurnLines()
    lines(ModelFailed(error_type="ProviderUnavailableError",
                      message="openai at http://127.0.0.1:9/v1: connection refused\nmore"))
    lines(RecoveryDecided(reason="transport", action="retry", detail="d"))
    lines(RecoveryDecided(reason="transport", action="fail", detail="d"))
    assert capsys.readouterr().err.splitlines() == [
        "mibyan: openai at http://127.0.0.1:9/v1: connection refused; retrying after a pause"]
