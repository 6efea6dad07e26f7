"""Compare GGUF models as mibyan's embedded local model, on llama.cpp's own server (xllamacpp).

    uv run python bench/local_model.py                     # the default model (SmolLM2 135M)
    uv run python bench/local_model.py --model a.gguf --model b.gguf --temperature 0

Each model runs in ``LocalServer`` as mibyan runs it, with mibyan's system prompt, and answers a
small prompt set: questions with a known answer (is the expected word in the reply?) and the
README's main job with tools offered (``list_directory``, ``read_file``), unforced and forced
(``tool_choice="required"``). Printed: per prompt the verdict and the reply's start, then per
model the score, tool calls, generation speed (llama.cpp's own ``predicted_per_second``, median),
and the file's size. Not a test: a tiny model's answers are measurements, not guarantees.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from effects.local.llama_server import LocalServer
from effects.local.model_file import LocalSettings, model_file
from stages.prompt.system import DEFAULT_IDENTITY

TOOLS = [{"type": "function", "function": {
    "name": name, "description": text,
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}
    for name, text in (("list_directory", "List the files in a directory."),
                       ("read_file", "Read a text file."))]
# (prompt, expected words (any), tools?, tool_choice)
PROMPTS = [
    ("What is the capital of France?", ("Paris",), False, None),
    ("What is 7 + 5?", ("12", "twelve"), False, None),
    ("What is 9 times 3?", ("27",), False, None),
    ("What colour is the sky on a clear day?", ("blue",), False, None),
    ("Translate 'thank you' into French.", ("merci",), False, None),
    ("What files are in this directory?", ("list_directory",), True, None),
    ("Show me the contents of README.md.", ("read_file",), True, None),
    ("What files are in this directory?", ("list_directory",), True, "required"),
]


def ask(client: httpx2.Client, prompt: str, tools: bool, choice: str | None,
        temperature: float | None, max_tokens: int) -> tuple[str, bool, float]:
    body: dict = {"messages": [{"role": "system", "content": DEFAULT_IDENTITY},
                               {"role": "user", "content": prompt}], "max_tokens": max_tokens}
    if temperature is not None:
        body["temperature"] = temperature
    if tools:
        body["tools"] = TOOLS
    if choice:
        body["tool_choice"] = choice
    reply = client.post("/chat/completions", json=body).json()
    message = reply["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    text = (" ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)
            if calls else message.get("content") or "")
    return text, bool(calls), reply["timings"]["predicted_per_second"]


def run_model(settings: LocalSettings, temperature: float | None, max_tokens: int) -> dict:
    home = Path(tempfile.mkdtemp(prefix="mibyan-bench-model-"))
    path = model_file(settings)
    started = time.perf_counter()
    server = LocalServer.get(home, settings)
    start_s = time.perf_counter() - started
    rows, rates = [], []
    try:
        with httpx2.Client(base_url=server.base_url, timeout=300.0) as client:
            for prompt, expected, tools, choice in PROMPTS:
                text, called, rate = ask(client, prompt, tools, choice, temperature, max_tokens)
                ok = any(word.lower() in text.lower() for word in expected)
                ok = ok and (called or not tools)  # a tool prompt counts only as a real call
                rows.append((prompt, choice, ok, called, text))
                rates.append(rate)
    finally:
        server.stop()
    return {"name": settings.model_name, "rows": rows, "start_s": start_s,
            "rate": statistics.median(rates), "size_mb": path.stat().st_size / 1e6 if path else 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", type=Path, default=[],
                        help="a GGUF file (repeatable); default: the packaged SmolLM2")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sent with each request (default: the server's)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    candidates = [LocalSettings(model_path=m, threads=args.threads, chat_template="model")
                  for m in args.model] or [LocalSettings(threads=args.threads)]
    results = [run_model(s, args.temperature, args.max_tokens) for s in candidates]
    for r in results:
        print(f"\n## {r['name']}")
        for prompt, choice, ok, called, text in r["rows"]:
            flag = "ok  " if ok else "MISS"
            forced = f" [tool_choice={choice}]" if choice else ""
            print(f"{flag} {prompt}{forced}\n     -> {text[:110]!r}")
    print("\n| model | answers right | tool call unforced | tool call forced | tok/s | "
          "start s | file MB |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        plain = [row for row, p in zip(r["rows"], PROMPTS, strict=True) if not p[2]]
        free = [row for row, p in zip(r["rows"], PROMPTS, strict=True) if p[2] and not p[3]]
        forced = [row for row, p in zip(r["rows"], PROMPTS, strict=True) if p[3]]
        print(f"| {r['name']} | {sum(x[2] for x in plain)}/{len(plain)} | "
              f"{sum(x[3] for x in free)}/{len(free)} | {sum(x[3] for x in forced)}/{len(forced)}"
              f" | {r['rate']:.1f} | {r['start_s']:.1f} | {r['size_mb']:.0f} |")
    print(json.dumps({"temperature": args.temperature, "threads": args.threads}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
