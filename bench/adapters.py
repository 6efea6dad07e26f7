"""Per-call overhead of each provider adapter against a bare-httpx floor, and connections per
session. Not part of the test suite; it asserts nothing and prints one report.

    python bench/adapters.py             # 0, 200 and 2,000 history messages, both modes
    python bench/adapters.py --quick     # fewer calls per case

For each adapter (chat completions, Responses, Anthropic Messages), mode (JSON, SSE) and
history size, the adapter's ``complete()`` and the floor run in alternating rounds against the
same loopback fake server (in a thread of this process). The floor posts the adapter's own
request body, pre-built once, with a bare ``httpx2.Client`` and reads the response to its end:
what any client must do. So ``adapter - floor`` is what mibyan adds per call: encoding the
request from history, the shell (deadline, abort, error mapping) and parsing the reply.
A ``sdk`` row shows the previous path (the openai SDK's ``post`` around the same bytes) for the
chat adapter. The last table counts the TCP connections an 11-call session opened.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from effects.providers import anthropic_convert, openai_chat, openai_responses
from effects.providers.anthropic_messages import AnthropicMessagesClient  # noqa: E402
from effects.providers.openai_chat import OpenAIChatClient  # noqa: E402
from effects.providers.openai_responses import OpenAIResponsesClient  # noqa: E402
from stages.decision import ModelRequest  # noqa: E402
from stages.log.messages import Message, ToolCall  # noqa: E402
from stages.log.tool_specs import ToolSpec  # noqa: E402
from tests import fake_anthropic, fake_openai, fake_responses  # noqa: E402

SIZES = (0, 200, 2000)
CALLS = {0: 300, 200: 120, 2000: 30}
SESSION_CALLS = 11
SPEC = ToolSpec(name="read_file", description="Read a file.", parameters='{"type":"object"}')
ADAPTERS: dict[str, tuple[Any, Any, Any, Callable, str]] = {
    # name: (adapter class, fake server class, reply, request body, route)
    "chat": (OpenAIChatClient, fake_openai.FakeOpenAIServer, fake_openai.Reply.text("ok"),
             openai_chat.request_body, "/chat/completions"),
    "responses": (OpenAIResponsesClient, fake_responses.FakeResponsesServer,
                  fake_responses.ResponsesReply.text("ok"), openai_responses.request_body,
                  "/responses"),
    "anthropic": (AnthropicMessagesClient, fake_anthropic.FakeAnthropicServer,
                  fake_anthropic.Reply.text("ok"), anthropic_convert.request_body,
                  "/messages"),
}


def history(n: int) -> tuple[Message, ...]:
    """``n`` messages of about 400 characters; every fifth exchange is a tool call."""
    out: list[Message] = []
    while len(out) < n:
        i = len(out)
        text = f"[{i}] " + "The agent reads its event log and replays each stage. " * 7
        if i % 10 == 1 and n - len(out) >= 2:
            call = ToolCall(id=f"call_{i}", name="read_file", arguments='{"path":"a.py"}')
            out += [Message(role="assistant", content=None, tool_calls=(call,)),
                    Message(role="tool", content=text, tool_call_id=call.id)]
        else:
            out.append(Message(role="user" if i % 2 == 0 else "assistant", content=text))
    return tuple(out[:n]) + (Message(role="user", content="Go on."),)


def request(n: int, stream: bool) -> ModelRequest:
    return ModelRequest(model="m", provider="bench", api_mode="any", purpose="step",
                        system_prompt="Be brief.", messages=history(n), tools=(SPEC,),
                        stream=stream)


def floor_call(http: Any, url: str, body: bytes) -> Callable[[], None]:
    headers = {"Authorization": "Bearer k", "x-api-key": "k", "Content-Type": "application/json",
               "anthropic-version": "2023-06-01"}

    def call() -> None:
        with http.stream("POST", url, content=body, headers=headers) as response:
            for _ in response.iter_bytes():
                pass
    return call


def sdk_call(base_url: str, body: bytes) -> Callable[[], None]:
    """The chat adapter's previous path: the openai SDK's ``post`` around the same bytes."""
    import openai
    client = openai.OpenAI(base_url=base_url, api_key="k", max_retries=0)
    options = {"headers": {"Content-Type": "application/json"}}

    def call() -> None:
        stream = client.post("/chat/completions", cast_to=object, content=body, stream=True,
                             stream_cls=openai.Stream[object], options=options)
        with stream:
            if stream.response.headers.get("content-type", "").startswith("text/event-stream"):
                for _ in stream:
                    pass
            else:
                stream.response.read()
    return call


def timed(variants: dict[str, Callable[[], None]], calls: int, server: Any) -> dict[str, float]:
    """Median ms per call of each variant, run in rotating order round by round."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for _ in range(3):  # warm-up
        for name in names:
            variants[name]()
    for round_ in range(calls):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            started = time.perf_counter()
            variants[name]()
            samples[name].append((time.perf_counter() - started) * 1000.0)
        server.reset()  # recorded bodies would grow the heap
    return {name: statistics.median(values) for name, values in samples.items()}


def overhead_table(sizes: tuple[int, ...], quick: bool) -> None:
    import httpx2
    http = httpx2.Client(timeout=60.0)
    print("per-call time, median ms (overhead = adapter - floor; ratio = adapter / floor)")
    print(f"{'adapter':<10} {'mode':<5} {'history':>7} {'floor':>8} {'adapter':>8} "
          f"{'overhead':>9} {'ratio':>6}   {'sdk (previous)':>14}")
    for name, (client_type, server_type, reply, body_of, route) in ADAPTERS.items():
        for stream in (False, True):
            for n in sizes:
                with server_type(default=reply) as server:
                    req = request(n, stream)
                    client = client_type(base_url=server.base_url, api_key="k", timeout=60.0)
                    body = body_of(req)
                    url = client.shell.url
                    variants = {"floor": floor_call(http, url, body),
                                "adapter": lambda c=client, r=req: c.complete(r)}
                    if name == "chat":
                        variants["sdk"] = sdk_call(server.base_url, body)
                    calls = max(5, CALLS[n] // (5 if quick else 1))
                    ms = timed(variants, calls, server)
                sdk = f"{ms['sdk']:>8.3f} ms" if "sdk" in ms else ""
                print(f"{name:<10} {'sse' if stream else 'json':<5} {n:>7} {ms['floor']:>8.3f} "
                      f"{ms['adapter']:>8.3f} {ms['adapter'] - ms['floor']:>9.3f} "
                      f"{ms['adapter'] / ms['floor']:>6.2f}   {sdk:>14}")


def connections_table() -> None:
    print(f"\nTCP connections opened by one adapter over a {SESSION_CALLS}-call session")
    for name, (client_type, server_type, reply, _, _) in ADAPTERS.items():
        for stream in (False, True):
            with server_type(default=reply) as server:
                client = client_type(base_url=server.base_url, api_key="k", timeout=60.0)
                for _ in range(SESSION_CALLS):
                    client.complete(request(4, stream))
                print(f"{name:<10} {'sse' if stream else 'json':<5} {server.connections}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per case")
    args = parser.parse_args()
    import os
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    overhead_table(SIZES, args.quick)
    connections_table()
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
