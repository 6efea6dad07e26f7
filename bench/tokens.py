"""What token recording costs (docs/token-samples.md), on the embedded model and in export.

    uv run python bench/tokens.py              # 6 turns each way on the embedded model
    uv run python bench/tokens.py --turns 10

1. A one-turn session on the embedded model (SmolLM2 135M, llama.cpp's own server), with and
   without ``record_tokens``, the two alternating: the turn's wall time (median) and the log's
   bytes per model call. Recording adds two loopback calls per model call (``/apply-template``
   and ``/tokenize``) and the prompt's ids to the log.
2. The export's own cost: ``token_samples`` over synthetic calls (sessions of 10 calls, prompts
   growing to 8,000 tokens), tokens laid out per second.
3. A named tokenizer (the embedded model's GGUF file, with the template its server runs): the
   load (GGUF metadata, conversion), then per model call the prompt's tokenisation through the
   chat template (a system prompt, eight tools, a history of growing length) and the naming of
   100 reply pieces' ids: what ``with_named_tokens`` adds to a call.

    uv run python bench/tokens.py --only-named     # part 3 alone, no server

Not a test: figures for the report, on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from effects.eventlog.store import session_path  # noqa: E402
from pipeline.agent import Agent  # noqa: E402
from pipeline.export.tokens import token_samples  # noqa: E402
from stages.log.tokens import ReplyTokens  # noqa: E402

PROMPT = "Name three colours."


def _turn(home: Path, record: bool) -> tuple[float, int]:
    started = time.perf_counter()
    with Agent(home=home, max_tokens=24, record_tokens=record, stream=False) as agent:
        result = agent.run_conversation(PROMPT)
    seconds = time.perf_counter() - started
    size = session_path(home / "sessions", result["session_id"]).stat().st_size
    return seconds, size


def embedded(turns: int) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MIBYAN_MODEL"):
        os.environ.pop(name, None)
    home = Path(tempfile.mkdtemp(prefix="bench-tokens-"))
    _turn(home, False)  # start the server once, outside the figures
    times: dict[bool, list[float]] = {False: [], True: []}
    sizes: dict[bool, list[int]] = {False: [], True: []}
    for index in range(2 * turns):
        record = bool(index % 2)
        seconds, size = _turn(home, record)
        times[record].append(seconds)
        sizes[record].append(size)
    side_calls(home)
    for record in (False, True):
        print(f"record_tokens={record!s:5}  turn median {statistics.median(times[record]):.3f} s"
              f"  (min {min(times[record]):.3f})  log {statistics.median(sizes[record]):,.0f}"
              " bytes (one model call)")


def side_calls(home: Path) -> None:
    """The two calls recording adds per model call, alone: the prompt of a session's call."""
    import json

    import httpx2

    from effects.local.llama_server import LocalServer
    from effects.providers.token_wire import prompt_tokens
    from stages.decision import ModelRequest
    server = LocalServer.get(home)
    root = f"http://127.0.0.1:{server.port}"
    system = "You are a helpful assistant. " * 60  # about the size of mibyan's system prompt
    body = json.dumps({"model": server.model_name, "messages": [
        {"role": "system", "content": system}, {"role": "user", "content": PROMPT}]}).encode()
    request = ModelRequest(model=server.model_name, provider="local", api_mode="chat_completions",
                           purpose="step", system_prompt=None, messages=())
    with httpx2.Client(timeout=60) as client:
        def post(path: str, data: bytes) -> object:
            return client.post(root + path, content=data,
                               headers={"Content-Type": "application/json"}).json()
        times = []
        for _ in range(20):
            started = time.perf_counter()
            ids, _source = prompt_tokens(post, body, request)
            times.append(time.perf_counter() - started)
    print(f"prompt tokenisation ({len(ids or ())} tokens, /apply-template + /tokenize): "
          f"median {statistics.median(times) * 1000:.1f} ms")


def export(sessions: int) -> None:
    calls = []
    for _ in range(sessions):
        prompt: tuple[int, ...] = tuple(range(800))
        for _ in range(10):
            ids = tuple(range(100, 200))
            calls.append(ReplyTokens(pieces=("x",) * 100, logprobs=(-0.5,) * 100, ids=ids,
                                     prompt_ids=prompt))
            prompt = (*prompt, *ids, *range(600))
    started = time.perf_counter()
    tokens = 0
    for start in range(0, len(calls), 10):
        samples, _ = token_samples(calls[start:start + 10])
        tokens += sum(len(s.tokens) for s in samples)
    seconds = time.perf_counter() - started
    print(f"token_samples: {sessions} sessions of 10 calls, {tokens:,} tokens laid out in "
          f"{seconds:.2f} s ({tokens / seconds / 1e6:.1f} M tokens/s)")


def named(calls: int = 20) -> None:
    import json

    from effects.local.model_file import TEMPLATE_FILE, default_model
    from effects.providers.gguf_metadata import read_metadata
    from effects.providers.named_tokenizer import load_tokenizer, with_named_tokens
    from stages.decision import ModelRequest
    from stages.log.events import ModelReplied, Usage
    from stages.log.messages import Message, ToolCall
    from stages.log.tool_specs import ToolSpec

    started = time.perf_counter()
    read_metadata(default_model(), lambda key: key.startswith("tokenizer."))
    metadata = time.perf_counter() - started
    started = time.perf_counter()
    tokenizer = load_tokenizer(str(default_model()))
    print(f"named tokenizer: GGUF metadata {metadata:.2f} s, whole load (transformers' import "
          f"and conversion included) {time.perf_counter() - started:.2f} s")
    tokenizer.chat_template = TEMPLATE_FILE.read_text(encoding="utf-8")
    tools = tuple(ToolSpec(name=f"tool_{i}", description="Does one thing. " * 8,
                           parameters=json.dumps({"type": "object", "properties": {
                               "path": {"type": "string"}, "n": {"type": "integer"}}},
                               sort_keys=True)) for i in range(8))
    pieces = tuple(tokenizer.convert_ids_to_tokens(list(range(300, 400))))
    pieces = tuple(tokenizer.convert_tokens_to_string([p]) for p in pieces)
    for turns in (1, 10, 40):
        history: list[Message] = []
        for i in range(turns):
            history += [Message(role="user", content=f"Question {i}: " + "why? " * 40),
                        Message(role="assistant", content=None, tool_calls=(ToolCall(
                            id=f"c{i}", name="tool_1", arguments='{"path":"a.py"}'),)),
                        Message(role="tool", content="result " * 60, tool_call_id=f"c{i}")]
        request = ModelRequest(model="m", provider="openai", api_mode="chat_completions",
                               purpose="step", system_prompt="You are a helpful assistant. " * 60,
                               messages=tuple(history), tools=tools, logprobs=True,
                               tokenizer="bench")
        reply = ModelReplied(message=Message(role="assistant", content="".join(pieces)),
                             finish_reason="stop", usage=Usage(), model="m", latency_ms=1.0,
                             tokens=ReplyTokens(pieces=pieces, logprobs=(-0.5,) * len(pieces)))
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            out = with_named_tokens(reply, request, tokenizer)
            times.append(time.perf_counter() - started)
        assert out.tokens is not None and out.tokens.prompt_ids
        print(f"  prompt of {len(out.tokens.prompt_ids):,} tokens + 100 reply ids"
              f" ({'named' if out.tokens.ids else 'unnamed'}): median "
              f"{statistics.median(times) * 1000:.1f} ms per call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--only-named", action="store_true",
                        help="only the named tokenizer's figures (no server)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    named()
    if args.only_named:
        return
    embedded(args.turns)
    export(args.sessions)


if __name__ == "__main__":
    main()
