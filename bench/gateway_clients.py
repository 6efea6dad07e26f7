"""mibyan gateway clients bench: what a request costs through each of the gateway's client
APIs, and what starting a session's MCP server costs confined and not. Not part of the test
suite.

    uv run python bench/gateway_clients.py              # 40 requests of each kind, 5 starts
    uv run python bench/gateway_clients.py --requests 10 --starts 2

A gateway in this process (uvicorn in a thread, as the tests run it) over the fake OpenAI
server, driven by the ``openai`` SDK; each figure is the median wall time of one request,
client to client: a chat completion, a chat completion with client tools (the call and the
request bringing its result, two requests), a Responses request, one streamed, and a
``/metrics`` scrape after them. Then the start and stop of one stdio MCP server (the test
server) unconfined, and in the bubblewrap sandbox, as a gateway session does it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx2  # noqa: E402
import openai  # noqa: E402

from effects.tools.sandbox import SandboxPolicy, probe  # noqa: E402
from pipeline.mcp_tools import mcp_tools  # noqa: E402
from tests.fake_openai import FakeOpenAIServer, Reply  # noqa: E402
from tests.pipeline.serve.conftest import TOKENS, start_gateway  # noqa: E402

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}
SERVER = str(ROOT / "tests" / "pipeline" / "mcp_server.py")


def median_ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:7.1f} ms"


def timed(n: int, once: Callable[[], object]) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return times


def requests(n: int) -> None:
    with tempfile.TemporaryDirectory() as scratch, FakeOpenAIServer(
            Reply.text("A short answer.")) as upstream:
        work = Path(scratch) / "work"
        work.mkdir()
        for gateway in start_gateway(upstream, Path(scratch) / "home", work):
            figures = measure(gateway.url, upstream, n)
    for name, times in figures.items():
        print(f"{name:37}{median_ms(times)}")


def measure(url: str, upstream: FakeOpenAIServer, n: int) -> dict[str, list[float]]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKENS["alice"], max_retries=0)
    hi = [{"role": "user", "content": "hi"}]

    def round_trip() -> None:
        upstream.script(Reply.tool_calls([("get_weather", '{"city": "Oslo"}')]),
                        Reply.text("Snow."))
        first = client.chat.completions.create(model="mibyan", messages=hi, tools=[WEATHER])
        call = first.choices[0].message.tool_calls[0]
        client.chat.completions.create(model="mibyan", tools=[WEATHER], messages=[
            *hi, first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "snow"}])
    figures = {
        "chat completion": timed(n, lambda: client.chat.completions.create(
            model="mibyan", messages=hi)),
        "client tool round trip (2 requests)": timed(n, round_trip),
        "responses": timed(n, lambda: client.responses.create(model="mibyan", input="hi")),
        "responses, streamed": timed(n, lambda: list(client.responses.create(
            model="mibyan", input="hi", stream=True)))}
    with httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}
                       ) as raw:
        figures[f"/metrics scrape ({4 * n} sessions open)"] = timed(
            n, lambda: raw.get("/metrics").raise_for_status())
    return figures


def starts(n: int) -> None:
    server = {"name": "probe", "command": sys.executable, "args": [SERVER, "stdio"]}
    with tempfile.TemporaryDirectory() as work:
        for mode in ("full-access", "workspace-write"):
            if mode != "full-access" and not probe().started:
                print(f"MCP server start+stop, {mode}: no sandbox here")
                continue
            times = timed(n, lambda m=mode: mcp_tools(
                server, sandbox=SandboxPolicy(mode=m), root=work).close())
            print(f"MCP server start+stop, {mode:16}{median_ms(times)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    requests(args.requests)
    starts(args.starts)


if __name__ == "__main__":
    main()
