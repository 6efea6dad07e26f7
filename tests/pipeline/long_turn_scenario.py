"""The long-turn scenario of issue 27 in each API mode: one user turn of hundreds of tool calls
against an in-tree fake server with a small window, which refuses a request over it with the
real API's overflow error and writes the summaries the compressor asks for. Used by
``test_long_turn.py`` and by ``bench/long_turn.py`` (the figures)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.testing import CountingIds, FakeClock
from pipeline.tools import Tool
from stages.context.compression_plan import SUMMARY_PREFIX
from stages.log import events as ev
from tests.fake_anthropic import FakeAnthropicServer
from tests.fake_anthropic import Reply as AnthropicReply
from tests.fake_http import FakeHTTPServer
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.fake_responses import FakeResponsesServer, ResponsesReply

# chat_completions: OpenAI's refusal; llamacpp: the same fake with llama.cpp's.
MODES = ("chat_completions", "llamacpp", "codex_responses", "anthropic_messages")
_SUMMARY_ASKS = ("NEW TURNS TO INCORPORATE", "CONVERSATION:")


def read(path: str = "") -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    return f"contents of {path}: " + "x" * 250


class _Summariser:
    """A fake server's summariser: a summary request gets an update (the calls it saw are
    done, the next one in progress); every other request its scripted reply."""

    summaries = 0
    text_reply: Callable[[str], Any]

    def _record(self, body: dict[str, Any] | None, headers: dict[str, str], *,
                take: bool = True, refused: bytes | None = None) -> Any:
        text = json.dumps(body or {})
        if refused is None and body is not None and any(a in text for a in _SUMMARY_ASKS):
            with self._lock:  # type: ignore[attr-defined]
                self.summaries += 1
                n = self.summaries
            last = max((int(s) for s in re.findall(r"file (\d+)", text)), default=-1)
            return self.text_reply(
                f"## Goal\n- read every file\n## Done\n- read files up to {last} (summary {n})\n"
                f"## In Progress\n- file {last + 1}\n## Facts\n- none\n## Open Questions\n"
                "- none\n")
        return super()._record(body, headers, take=take, refused=refused)  # type: ignore[misc]


class ChatServer(_Summariser, FakeOpenAIServer):
    text_reply = staticmethod(Reply.text)


class LlamaCppServer(ChatServer):
    """The chat fake refusing as llama.cpp's server does (its body names the window only in
    ``n_ctx``)."""

    def _overflow_body(self, tokens: int, window: int) -> bytes:
        return json.dumps({"error": {
            "code": 400, "message": "the request exceeds the available context size, try "
            "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": tokens,
            "n_ctx": window}}).encode()


class ResponsesServer(_Summariser, FakeResponsesServer):
    text_reply = staticmethod(ResponsesReply.text)


class AnthropicServer(_Summariser, FakeAnthropicServer):
    text_reply = staticmethod(AnthropicReply.text)


def server(mode: str, window: int) -> FakeHTTPServer:
    kinds: dict[str, type[FakeHTTPServer]] = {
        "chat_completions": ChatServer, "llamacpp": LlamaCppServer,
        "codex_responses": ResponsesServer, "anthropic_messages": AnthropicServer}
    return kinds[mode](window=window)


def _script(mode: str, srv: FakeHTTPServer, calls: int) -> None:
    args = [json.dumps({"path": f"file {n}"}) for n in range(calls)]
    if mode == "codex_responses":
        srv.script(*(ResponsesReply.function_calls([("read", a)]) for a in args),
                   ResponsesReply.text("read them all"))
    elif mode == "anthropic_messages":
        srv.script(*(AnthropicReply.tool_use([("read", a)]) for a in args),
                   AnthropicReply.text("read them all"))
    else:
        srv.script(*(Reply.tool_calls([("read", a)]) for a in args), Reply.text("read them all"))


def _options(mode: str) -> dict[str, Any]:
    if mode == "codex_responses":
        return {"api_mode": "codex_responses", "model": "fake-model"}
    if mode == "anthropic_messages":
        return {"provider": "anthropic", "model": "claude-fake"}
    return {"model": "fake-model"}


@dataclass(frozen=True)
class Outcome:
    """What one run did: the result, its events and the figures of the report."""

    result: dict[str, Any]
    events: list[ev.Event]
    summaries: int
    refused: int
    largest: int
    seconds: float
    most_summaries_in_a_request: int
    left_over: int  # scripted replies never requested
    unexpected: list[str]

    @property
    def compressions(self) -> list[ev.ContextCompressed]:
        return [e for e in self.events if isinstance(e, ev.ContextCompressed)]

    @property
    def final_summary(self) -> str:
        return next((c.summary for c in reversed(self.compressions) if c.summary), "")


def _summaries_in(request: dict[str, Any] | None) -> int:
    request = request or {}
    items = request.get("messages") or request.get("input") or []
    return sum(SUMMARY_PREFIX in json.dumps(m) for m in items)


def events_of(home: Path, sid: str) -> list[ev.Event]:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", sid))]


def run(mode: str, home: Path, *, window: int, calls: int, told: bool,
        stream: bool = False) -> Outcome:
    """One turn of ``calls`` reads on a ``window``-token server; ``told``: the agent is given
    the window (else it learns it from the server's refusal)."""
    srv = server(mode, window)
    _script(mode, srv, calls)
    options = _options(mode) | ({"context_length": window} if told else {})
    started = time.perf_counter()
    with srv, Agent(base_url=srv.base_url, api_key="sk-test", home=home, clock=FakeClock(),
                    ids=CountingIds(), stream=stream, max_retries=0, max_turns=calls + 5,
                    tools=[Tool.from_function(read, read_only=True)], **options) as agent:
        result = agent.run_conversation("read every file, one at a time")
        seconds = time.perf_counter() - started
        most = max(map(_summaries_in, srv.requests), default=0)
        return Outcome(result=result, events=events_of(home, result["session_id"]),
                       summaries=srv.summaries,  # type: ignore[attr-defined]
                       refused=len(srv.rejections), largest=srv.largest_prompt,
                       seconds=seconds, most_summaries_in_a_request=most,
                       left_over=srv.pending, unexpected=srv.unexpected)
