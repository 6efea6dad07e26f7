"""One user turn of 300 tool calls on a 4,000-token window, end to end (rules 7): a real Agent
with a real tool against the fake OpenAI server on loopback, which refuses a request over its
window as llama.cpp does and writes the summaries the compressor asks for. The turn completes,
every compression of the turn updates the one summary, and the session replays byte for byte."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock
from pipeline.tools import Tool
from stages.context.compression_plan import SUMMARY_PREFIX
from stages.fold import fold
from stages.log import events as ev
from stages.log.alternation import violations
from tests.fake_openai import FakeOpenAIServer, Reply

WINDOW, CALLS = 4_000, 300


def read(path: str = "") -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    return f"contents of {path}: " + "x" * 250


class WindowedServer(FakeOpenAIServer):
    """The fake server with a window: a request over it gets llama.cpp's refusal, a summary
    request gets an update (the calls it saw are done, the next one in progress)."""

    def __init__(self) -> None:
        super().__init__()
        self.summaries = self.refused = self.largest = 0

    def _record(self, body: dict[str, Any] | None, headers: dict[str, str], **kw: Any) -> Any:
        text = json.dumps(body or {})
        tokens = len(text) // 4
        if tokens > WINDOW:
            with self._lock:
                self.refused += 1
            return Reply.error(400, f"the request exceeds the available context size, try "
                               f"increasing it: context size is {WINDOW} tokens",
                               code="exceed_context_size_error")
        if "NEW TURNS TO INCORPORATE" in text or "CONVERSATION:" in text:
            with self._lock:
                self.summaries += 1
                n = self.summaries
            steps = [int(s) for s in re.findall(r"file (\d+)", text)]
            last = max(steps, default=-1)
            return Reply.text(f"## Goal\n- read every file\n## Done\n- read files up to {last} "
                              f"(summary {n})\n## In Progress\n- file {last + 1}\n## Facts\n"
                              f"- none\n## Open Questions\n- none\n")
        self.largest = max(self.largest, tokens)
        return super()._record(body, headers, **kw)


@pytest.fixture
def windowed() -> Iterator[WindowedServer]:
    with WindowedServer() as srv:
        yield srv
        srv.assert_done()


def _events(home, sid: str) -> list[ev.Event]:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", sid))]


@pytest.mark.slow
def test_a_300_call_turn_completes_and_replays_byte_for_byte(windowed, home) -> None:
    windowed.script(*(Reply.tool_calls([("read", json.dumps({"path": f"file {n}"}))])
                      for n in range(CALLS)), Reply.text("read them all"))
    with Agent(model="fake-model", base_url=windowed.base_url, api_key="sk-test", home=home,
               clock=FakeClock(), ids=CountingIds(), stream=False, max_retries=0,
               context_length=WINDOW, max_turns=CALLS + 5,
               tools=[Tool.from_function(read, read_only=True)]) as agent:
        result = agent.run_conversation("read every file, one at a time")
        sid = result["session_id"]
    assert result["completed"] and result["final_response"] == "read them all", result
    events = _events(home, sid)
    assert sum(isinstance(e, ev.ToolRan) for e in events) == CALLS
    compressions = [e for e in events if isinstance(e, ev.ContextCompressed)]
    assert len(compressions) >= 30 and windowed.summaries == len(compressions)
    assert windowed.refused == 0 and windowed.largest <= WINDOW
    # Each compression updated the one summary: the last one knows the latest files and keeps
    # (or counts) what came before; no request ever carried two summaries.
    last = compressions[-1].summary or ""
    assert re.search(r"read files up to 29\d", last)
    assert "(summary 1)" in last or "earlier finished items folded" in last
    for request in windowed.requests:
        messages = request["messages"] if request else []
        assert sum(SUMMARY_PREFIX in json.dumps(m) for m in messages) <= 1
    assert violations(fold(events).messages) == []
    report = replay(home / "sessions", sid)
    assert report.identical, report.describe()
