"""Why the adapters do not call the official SDK: the cost of building a request as the history
grows. Not part of the test suite; it asserts nothing and prints one table.

    python bench/sdk_requests.py            # 0, 200 and 2,000 history messages
    python bench/sdk_requests.py --quick    # fewer calls per case

Three clients make the same non-streaming chat call against one loopback fake OpenAI server
(tests/fake_openai.py), in alternating rounds: ``floor`` posts the adapter's request body,
built once beforehand, with a bare ``httpx2.Client``; ``shell`` is ``OpenAIChatClient.complete``
(encoding the history through its per-message cache, the HTTP shell, parsing the reply);
``sdk`` is the openai SDK's ``client.chat.completions.create`` given the history already as
the dicts it takes (its validation, transformation and encoding, its pydantic reply). The
reply is the same few bytes whatever the history, so ``x - floor`` is what each client adds
for building the request and reading the reply.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

# bench/ itself; importing adapters puts the repository root on the path as well.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from adapters import SIZES, floor_call, request, timed

from effects.providers import openai_chat
from effects.providers.openai_chat import OpenAIChatClient
from tests.fake_openai import FakeOpenAIServer, Reply

CALLS = {0: 200, 200: 100, 2000: 30}


def sdk_call(base_url: str, body: bytes) -> Any:
    """``chat.completions.create`` with what the adapter sends, as the SDK's arguments."""
    import openai
    client = openai.OpenAI(base_url=base_url, api_key="k", max_retries=0)
    sent = json.loads(body)
    args = {k: v for k, v in sent.items() if k in ("model", "messages", "tools", "stream")}

    def call() -> None:
        client.chat.completions.create(**args)
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per case")
    quick = parser.parse_args().quick
    import httpx2
    http = httpx2.Client(timeout=60.0)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("non-streaming chat call, median ms per call (x - floor in brackets)")
    print(f"{'history':>7} {'body KB':>8} {'floor':>8} {'shell':>17} {'sdk':>17}")
    for n in SIZES:
        with FakeOpenAIServer(default=Reply.text("ok")) as server:
            req = request(n, stream=False)
            body = openai_chat.request_body(req)
            adapter = OpenAIChatClient(base_url=server.base_url, api_key="k", timeout=60.0)
            variants = {"floor": floor_call(http, adapter.shell.url, body),
                        "shell": lambda a=adapter, r=req: a.complete(r),
                        "sdk": sdk_call(server.base_url, body)}
            ms = timed(variants, max(5, CALLS[n] // (5 if quick else 1)), server)
        extra = {k: f"{ms[k]:8.3f} ({ms[k] - ms['floor']:6.3f})" for k in ("shell", "sdk")}
        print(f"{n:>7} {len(body) / 1024:>8.1f} {ms['floor']:>8.3f} {extra['shell']:>17} "
              f"{extra['sdk']:>17}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
