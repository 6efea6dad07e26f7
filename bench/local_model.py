"""mibyan benchmark for the embedded local model: time to first token and tokens per second
through mibyan against llama.cpp called directly, in-process and through its server.

    uv run python bench/local_model.py                 # 5 measured rounds, 64 tokens: 1-3 min
    uv run python bench/local_model.py --runs 9 --max-tokens 128

Needs the ``mibyan[local]`` extra. The OPENAI_* variables are ignored (unset in this process)
so that mibyan uses the local provider; MIBYAN_HOME is a temporary directory. See
bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

for _name in [n for n in os.environ if n.startswith("OPENAI_") or n == "MIBYAN_MODEL"]:
    del os.environ[_name]  # mibyan must fall back to the local provider

PROMPT = "Story {tag}. Tell me a long story about a lighthouse keeper and the sea."
# The llama.cpp server's defaults for a chat request that sets none (what mibyan sends).
SAMPLING = {"temperature": 0.8, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1}
STOP = ["<end_of_turn>", "<start_of_turn>"]  # the stops of the server's mibyan-gemma format


class Sample(dict):
    """One request's figures, in seconds: ``ttft``, ``wall``, ``tokens``, ``prompt_tokens``,
    ``rate`` (tokens/s after the first token) and, for mibyan, the HTTP exchange (``wire``,
    ``wire_ttfb``) and the time around it (``before``, ``after``, ``to_callback``)."""


def _rate(tokens: int, first: float, end: float) -> float | None:
    """Generation speed after the first token: ``tokens - 1`` of them in ``end - first``."""
    return (tokens - 1) / (end - first) if tokens > 1 and end > first else None


_counter = [0]


def prompt_text() -> str:
    """A distinct user message per request, all the same token count. The changing digit comes
    first, so no llama.cpp instance can reuse the previous request's user message from its KV
    cache; the system prompt before it is reused alike by all variants."""
    _counter[0] += 1
    return PROMPT.format(tag=str(1000 + _counter[0])[::-1][:3])


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """llama.cpp prints a KV-cache notice on fd 2 even with ``verbose=False``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class WireTimer:
    """Times mibyan's HTTP exchange where it happens: ``httpx2.HTTPTransport.handle_request``
    (the openai SDK's transport), from the request going out to the last byte of the body.
    Also keeps the last request body, so the raw client sends exactly what mibyan sends."""

    def __init__(self) -> None:
        import httpx2
        self.sent = self.first_byte = self.last_byte = 0.0
        self.body = b""
        original = httpx2.HTTPTransport.handle_request
        timer = self

        class TimedStream(httpx2.SyncByteStream):
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def __iter__(self) -> Iterator[bytes]:
                for chunk in self.inner:
                    now = time.perf_counter()
                    timer.first_byte = timer.first_byte or now
                    timer.last_byte = now
                    yield chunk

            def close(self) -> None:
                self.inner.close()

        def handle_request(transport: Any, request: Any) -> Any:
            timer.body = request.read()
            timer.first_byte = timer.last_byte = 0.0
            timer.sent = time.perf_counter()
            response = original(transport, request)
            response.stream = TimedStream(response.stream)
            return response

        httpx2.HTTPTransport.handle_request = handle_request  # type: ignore[method-assign]


# --- the three ways to ask the model ------------------------------------------------------------


class Direct:
    """llama.cpp in this process: ``Llama.create_completion`` on the prompt the server's
    ``mibyan-gemma`` chat format builds from the same messages, with the server's sampling."""

    def __init__(self, model: Path, n_ctx: int, threads: int, messages: list[dict]) -> None:
        import llama_cpp
        t0 = time.perf_counter()
        with quiet_stderr():
            self.llama = llama_cpp.Llama(model_path=str(model), n_ctx=n_ctx, n_threads=threads,
                                         n_threads_batch=threads, logits_all=False,
                                         flash_attn=True, verbose=False)
        self.load_seconds = time.perf_counter() - t0
        self.messages = messages

    def run(self, max_tokens: int) -> Sample:
        from effects.local_server import _gemma_turns
        messages = [*self.messages[:-1], {"role": "user", "content": prompt_text()}]
        prompt = _gemma_turns(messages, None, None)
        parts: list[str] = []
        first = 0.0
        t0 = time.perf_counter()
        for chunk in self.llama.create_completion(prompt, max_tokens=max_tokens, stream=True,
                                                  stop=STOP, **SAMPLING):
            piece = chunk["choices"][0]["text"]
            if piece:
                first = first or time.perf_counter()
                parts.append(piece)
        end = time.perf_counter()
        # counted as the server counts a streamed reply: the text re-tokenised
        tokens = len(self.llama.tokenize("".join(parts).encode(), add_bos=False, special=True))
        return Sample(ttft=first - t0, wall=end - t0, tokens=tokens, rate=_rate(tokens, first, end),
                      prompt_tokens=len(self.llama.tokenize(prompt.encode(), special=True)))

    def close(self) -> None:
        self.llama.close()


class Server:
    """The same llama.cpp server mibyan uses (``LocalServer``), with a raw ``httpx`` streaming
    POST of the body mibyan sends (only the user message differs), SSE lines parsed by hand."""

    def __init__(self, base_url: str, body: bytes) -> None:
        import httpx
        self.client = httpx.Client(base_url=base_url, timeout=120.0)
        self.request = json.loads(body)

    def run(self, max_tokens: int) -> Sample:
        request = {**self.request, "max_tokens": max_tokens}
        request["messages"] = [*request["messages"][:-1],
                               {"role": "user", "content": prompt_text()}]
        body = json.dumps(request).encode()
        first, usage = 0.0, {}
        t0 = time.perf_counter()
        with self.client.stream("POST", "/chat/completions", content=body,
                                headers={"Content-Type": "application/json"}) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
                if not first and any((c.get("delta") or {}).get("content")
                                     for c in chunk.get("choices") or ()):
                    first = time.perf_counter()
        end = time.perf_counter()
        tokens = usage.get("completion_tokens", 0)
        return Sample(ttft=first - t0, wall=end - t0, tokens=tokens, rate=_rate(tokens, first, end),
                      prompt_tokens=usage.get("prompt_tokens", 0))

    def close(self) -> None:
        self.client.close()


class Mibyan:
    """``Agent(home=..., max_tokens=..., stream=True, durability="flush")`` with no provider
    configured (so: the local one), one one-shot conversation per request."""

    def __init__(self, home: Path, max_tokens: int, wire: WireTimer) -> None:
        from pipeline.agent import Agent
        self.agent = Agent(home=home, max_tokens=max_tokens, stream=True, durability="flush")
        assert self.agent.settings.provider == "local", self.agent.settings.provider
        self.wire = wire

    def run(self, max_tokens: int) -> Sample:
        first = [0.0]

        def on_delta(_: str) -> None:
            first[0] = first[0] or time.perf_counter()

        message = prompt_text()
        t0 = time.perf_counter()
        result = self.agent.run_conversation(message, conversation_history=[],
                                             stream_callback=on_delta)
        end = time.perf_counter()
        assert result["completed"] and result["api_calls"] == 1, result["turn_exit_reason"]
        tokens = result["usage"]["output_tokens"]
        w = self.wire
        return Sample(ttft=first[0] - t0, wall=end - t0, tokens=tokens,
                      rate=_rate(tokens, first[0], end),
                      prompt_tokens=result["usage"]["input_tokens"],
                      wire=w.last_byte - w.sent, before=w.sent - t0, after=end - w.last_byte,
                      wire_ttfb=w.first_byte - w.sent, to_callback=first[0] - w.first_byte)

    def close(self) -> None:
        self.agent.close()


# --- report ---------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="measured rounds (default 5)")
    parser.add_argument("--max-tokens", type=int, default=64, help="per request (default 64)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    import faulthandler
    faulthandler.dump_traceback_later(600, exit=True)  # a safety net: never hang a CI box

    home = Path(tempfile.mkdtemp(prefix="mibyan-bench-local-"))
    os.environ["MIBYAN_HOME"] = str(home)
    started = time.perf_counter()
    load_start = os.getloadavg()
    try:
        import llama_cpp

        from effects.local_server import (
            DEFAULT_N_CTX, DEFAULT_THREADS, MODEL_NAME, LocalServer, ensure_model,
        )
        wire = WireTimer()
        print("mibyan benchmark: the embedded local model")
        print("=" * 100)
        print(f"machine     : {platform.machine()} {os.cpu_count()} cpus, load average at start "
              f"{load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}")
        print(f"python      : {platform.python_implementation()} {platform.python_version()}, "
              f"llama-cpp-python {llama_cpp.__version__}")
        print(f"model       : {MODEL_NAME}, n_ctx {DEFAULT_N_CTX}, {DEFAULT_THREADS} thread(s), "
              "flash_attn, logits_all off")
        print(f"workload    : one-shot chat, mibyan's system prompt + a {len(prompt_text())}-char "
              f"user message (distinct per request), max_tokens {args.max_tokens},")
        print("              the server's default sampling (temperature 0.8); 1 warm-up round + "
              f"{args.runs} measured rounds, variants in rotating order")
        print()

        print("1. Start-up")
        print("-" * 100)
        t0 = time.perf_counter()
        model = ensure_model(home)
        assembly = time.perf_counter() - t0
        print(f"ensure_model, fresh MIBYAN_HOME (assemble 4 chunks + sha256)   {assembly:6.2f} s  "
              f"({model.stat().st_size / 2**20:.0f} MiB)")
        t0 = time.perf_counter()
        server = LocalServer.get(home)
        cold = time.perf_counter() - t0
        print(f"LocalServer.get, cold (child process, model load, 1-token check) {cold:6.2f} s")
        t0 = time.perf_counter()
        LocalServer.get(home)
        print(f"LocalServer.get, running (the same child, reused)             "
              f"{(time.perf_counter() - t0) * 1000:6.2f} ms")
        mibyan = Mibyan(home, args.max_tokens, wire)
        mibyan.run(args.max_tokens)  # warm-up; also records the body mibyan sends
        messages = json.loads(wire.body)["messages"]
        direct = Direct(model, DEFAULT_N_CTX, DEFAULT_THREADS, messages)
        print(f"llama_cpp.Llama(...) in-process, for comparison                 "
              f"{direct.load_seconds:6.2f} s")
        print()

        variants = {"llama.cpp direct": direct, "llama.cpp server": Server(server.base_url,
                                                                           wire.body),
                    "mibyan": mibyan}
        samples: dict[str, list[Sample]] = {name: [] for name in variants}
        order = list(variants)
        for round_ in range(1 + args.runs):
            for name in order:
                sample = variants[name].run(args.max_tokens)
                if round_:  # round 0 warms every variant up
                    samples[name].append(sample)
            order = order[1:] + order[:1]
        for loop in variants.values():
            loop.close()

        print(f"2. Time to first token and generation speed (median of {args.runs}; "
              "p25-p75 in brackets)")
        print("-" * 100)
        print(f"{'variant':18} {'TTFT ms':>8} {'(p25-p75)':>15} {'tok/s':>7} {'(p25-p75)':>13} "
              f"{'out tok':>7} {'prompt':>6} {'wall ms':>8}")
        med: dict[str, dict[str, float]] = {}
        for name, rows in samples.items():
            ttft = [s["ttft"] for s in rows]
            rates = [s["rate"] for s in rows if s["rate"] is not None]
            med[name] = {"ttft": statistics.median(ttft), "rate": statistics.median(rates),
                         "wall": statistics.median(s["wall"] for s in rows)}
            prompts = sorted({s["prompt_tokens"] for s in rows})
            print(f"{name:18} {ms(med[name]['ttft'])} ({pct(ttft, .25) * 1000:6.1f}-"
                  f"{pct(ttft, .75) * 1000:6.1f}) {med[name]['rate']:7.1f} "
                  f"({pct(rates, .25):5.1f}-{pct(rates, .75):5.1f}) "
                  f"{statistics.median(s['tokens'] for s in rows):7.0f} "
                  f"{'/'.join(map(str, prompts)):>6} {ms(med[name]['wall'])}")
        print()
        print(f"{'':28} {'TTFT ms':>8} {'paired':>8} {'tok/s x':>8} {'paired':>8}")
        for name, peer in (("llama.cpp server", "llama.cpp direct"), ("mibyan", "llama.cpp direct"),
                           ("mibyan", "llama.cpp server")):
            pairs = list(zip(samples[name], samples[peer], strict=True))  # the same round
            ttft = statistics.median(a["ttft"] - b["ttft"] for a, b in pairs)
            rate = statistics.median(a["rate"] / b["rate"] for a, b in pairs
                                     if a["rate"] and b["rate"])
            print(f"{name + ' vs ' + peer.removeprefix('llama.cpp '):28} "
                  f"{(med[name]['ttft'] - med[peer]['ttft']) * 1000:+8.1f} {ttft * 1000:+8.1f} "
                  f"{med[name]['rate'] / med[peer]['rate']:8.3f} {rate:8.3f}")
        print("(difference and ratio of the medians; 'paired': the median of the per-round "
              "differences and ratios)")
        print("TTFT: from the call to the first non-empty text (mibyan: to the first "
              "stream_callback). tok/s: (output tokens - 1)")
        print("/ (end - first token); mibyan's end is run_conversation's return. Output tokens "
              "are the re-tokenised text, as the server counts.")
        print("Differences smaller than the p25-p75 spreads are the machine's noise, not the "
              "variants': section 3 times what mibyan adds\nto the same request directly.")
        print()

        rows = samples["mibyan"]
        over = [s["wall"] - s["wire"] for s in rows]
        print("3. mibyan's overhead per turn: its wall time minus the HTTP exchange of the same "
              "request (ms)")
        print("-" * 100)
        print(f"{'':40} {'median':>8} {'p25':>8} {'p75':>8}")
        for label, values in (
                ("wall (run_conversation)", [s["wall"] for s in rows]),
                ("HTTP exchange (request out..last byte)", [s["wire"] for s in rows]),
                ("overhead = wall - exchange", over),
                ("  before the request goes out", [s["before"] for s in rows]),
                ("  after the last byte", [s["after"] for s in rows]),
                ("exchange: request out..first byte", [s["wire_ttfb"] for s in rows]),
                ("TTFT overhead = TTFT - that", [s["before"] + s["to_callback"] for s in rows]),
                ("  first byte..first stream_callback", [s["to_callback"] for s in rows])):
            print(f"{label:40} {ms(statistics.median(values))} {ms(pct(values, .25))} "
                  f"{ms(pct(values, .75))}")
        share = statistics.median(over) / statistics.median(s["wall"] for s in rows)
        print(f"overhead is {share:.2%} of the turn (exchange timed at httpx2.HTTPTransport, "
              "in the same process)")
        print()
    finally:
        from effects.local_server import LocalServer
        LocalServer.stop_all()
        shutil.rmtree(home, ignore_errors=True)
    end = os.getloadavg()
    print("=" * 100)
    print(f"total {time.perf_counter() - started:.0f} s; load average at end {end[0]:.2f} "
          f"{end[1]:.2f} {end[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
