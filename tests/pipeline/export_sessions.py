"""Recorded sessions for the export tests, made deterministically (scripted model, fake clock,
counting ids), so that their exports can be compared with golden files."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.agent import Agent
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, tool_calls
from stages.decision import ModelRequest
from stages.log.events import ModelReplied, Usage
from stages.log.messages import Message, ToolCall

KEY = "sk-proj-ExportTestKey0123456789abcdef"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def lookup(name: str) -> str:
    """Look a name up in the directory.

    Args:
        name: Who to look up.
    """
    return json.dumps({"name": name, "token": GITHUB_TOKEN, "room": 12})


def reply(content: str | None, *, reasoning: str | None = None,
          calls: tuple[ToolCall, ...] = (), model: str = "scripted-1") -> ModelReplied:
    return ModelReplied(message=Message(role="assistant", content=content, reasoning=reasoning,
                                        tool_calls=calls),
                        finish_reason="tool_calls" if calls else "stop",
                        usage=Usage(input_tokens=20, output_tokens=5), model=model,
                        latency_ms=3.0)


def tool_session(home: Path) -> str:
    """Two turns: parallel tool calls with reasoning, a tool whose result holds a token, a
    secret the user pasted; then a plain answer."""
    model = ScriptedModel(
        reply("Let me add.", reasoning="Two sums; run them together.", calls=(
            ToolCall(id="call_a", name="add", arguments='{"a":1,"b":2}'),
            ToolCall(id="call_b", name="add", arguments='{"a":2,"b":2}'))),
        reply(None, calls=(ToolCall(id="call_c", name="lookup", arguments='{"name":"ada"}'),)),
        reply("3 and 4; Ada is in room 12.", reasoning="Both sums done."),
        "You are welcome.")
    with Agent(client=model, tools=[add, lookup], clock=FakeClock(),
               ids=CountingIds(prefix="tools"),
               home=home, model="model-a", api_key=KEY, stream=False) as agent:
        agent.chat(f"Add 1+2 and 2+2, and find Ada. My key is {KEY}.")
        agent.chat("Thanks!")
        sid = agent.session_id
    model.assert_complete()
    assert sid is not None
    return sid


class Summarising:
    """A model client: compression requests get a summary, others ``answer <n>`` (long)."""

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request: ModelRequest, *, on_delta=None, cancel=None) -> ModelReplied:
        del on_delta, cancel
        self.calls += 1
        if request.purpose == "compression":
            return reply(f"## Goal\nchat\n## Done\n- summary {self.calls}\n", model="long")
        return reply(f"answer {self.calls} " + "z" * 600, model="long")


def compressed_session(home: Path, turns: int = 8,
                       history: list[dict[str, str]] | None = None, *, window: int = 2048,
                       resume_at: int | None = None) -> list[str]:
    """A session driven past a small window until compression continued it in children
    (its first turn given ``history``; the session closed and resumed before turn
    ``resume_at``); returns the chain of session ids, root first."""
    seen: list[str] = []

    def agent(session_id: str | None = None, prefix: str = "long") -> Agent:
        return Agent(client=Summarising(), clock=FakeClock(), ids=CountingIds(prefix=prefix),
                     home=home, model="model-b", context_length=window, stream=False,
                     max_retries=0, session_id=session_id)

    current = agent()
    try:
        for n in range(turns):
            if n == resume_at and seen:
                current.close()
                current = agent(seen[-1], prefix="resumed")  # its children need new ids
            current.run(f"question {n} " + "q" * 500,
                        conversation_history=history if n == 0 else None)
            assert current.session_id is not None
            seen.append(current.session_id)
    finally:
        current.close()
    return list(dict.fromkeys(seen))


def simple_session(home: Path, prompt: str, answer: str, *, model: str = "model-c",
                   ids: CountingIds | None = None, task_id: str | None = None) -> str:
    scripted = ScriptedModel(answer)
    with Agent(client=scripted, clock=FakeClock(), ids=ids or CountingIds(prefix="simple"),
               home=home, model=model, stream=False) as agent:
        agent.run(prompt, task_id=task_id)
        sid = agent.session_id
    assert sid is not None
    return sid


def calls_session(home: Path) -> str:
    scripted = ScriptedModel(tool_calls(("add", {"a": 5, "b": 6})), "11")
    with Agent(client=scripted, tools=[add], clock=FakeClock(),
               ids=CountingIds(prefix="calls"), home=home, model="model-c",
               stream=False) as agent:
        agent.chat("5 + 6?")
        sid = agent.session_id
    assert sid is not None
    return sid
