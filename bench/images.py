"""What images cost: the send path's scan of a text-only history (the common case: every call
pays it), the first and the cached resolution of a history with images, the wire encoding of
a text message (the fast path every message takes), and storing an image.

    uv run python -m bench.images
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from effects.images import BlobStore, image_part, sendable_request
from effects.providers.openai_chat import request_body
from stages.decision import ModelRequest
from stages.log.content_parts import TextPart
from stages.log.history import History
from stages.log.messages import Message
from tests.images import png

SIZES = (200, 2000)


def _best(fn: Callable[[], object], rounds: int = 30) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _history(n: int) -> tuple[Message, ...]:
    return tuple(Message(role="user" if i % 2 == 0 else "assistant",
                         content=f"[{i}] " + "the agent reads its log " * 16) for i in range(n))


def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        store = BlobStore.in_home(Path(home))
        image = png(1024, 768, shade=3)
        started = time.perf_counter()
        part = image_part(image, store)
        stored_ms = (time.perf_counter() - started) * 1000
        print(f"storing a {len(image)} B PNG: {stored_ms:.3f} ms; "
              f"again (already stored): {_best(lambda: image_part(image, store)) * 1e3:.3f} ms")
        texts = [f"message {i} " * 40 for i in range(20_000)]
        start = time.perf_counter()
        for t in texts:
            Message(role="user", content=t)
        per = (time.perf_counter() - start) / len(texts) * 1e6
        print(f"a text message made (wire encoded once): {per:.2f} us")
        for n in SIZES:
            history = _history(n)
            request = ModelRequest(model="m", provider="p", api_mode="chat_completions",
                                   purpose="turn", system_prompt="s", messages=History(history))
            scan = _best(lambda r=request: sendable_request(r, store))
            as_tuple = attrs.evolve(request, messages=history)
            tuple_scan = _best(lambda r=as_tuple: sendable_request(r, store))
            body = _best(lambda r=request: request_body(r))
            with_image = (Message(role="user", content=(TextPart(text="see"), part)), *history)
            imaged = ModelRequest(model="m", provider="p", api_mode="chat_completions",
                                  purpose="turn", system_prompt="s", messages=with_image)
            start = time.perf_counter()
            sendable_request(imaged, store)
            first = time.perf_counter() - start
            cached = _best(lambda r=imaged: sendable_request(r, store))
            print(f"{n:>5} msgs: text-only history {scan * 1e6:6.2f} us (as a plain tuple, read "
                  f"through: {tuple_scan * 1e6:7.1f} us; the request body: {body * 1e6:8.1f} us)"
                  f"; with one image: first {first * 1e3:.3f} ms, then {cached * 1e6:7.1f} us")


if __name__ == "__main__":
    main()
