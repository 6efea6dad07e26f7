"""mibyan gateway guard bench: slow clients against a real ``mibyan serve --no-auth``, and the
cost of the request guard's JSON depth scan. Not part of the test suite.

    uv run python bench/gateway_guard.py                # 100 of each slow client, 10 s head
    uv run python bench/gateway_guard.py --clients 20 --head-timeout 3 --body-timeout 5

Each slow client sends one byte a second: a request head (slowloris), a request body after a
complete head, or nothing at all. Reported: how many the server closed, when (seconds from
their connection: median and max), how many were still open at ``--watch`` seconds (the
target is 0), what the body senders were answered (408), and a ``/health`` request's time
while they hang. Then what the JSON depth limit adds to parsing a body.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.serve.admission import Admission  # noqa: E402
from pipeline.serve.gateway_config import ServeConfig  # noqa: E402
from pipeline.serve.guard import RequestGuard  # noqa: E402
from pipeline.serve.json_limits import parse  # noqa: E402


def gateway(home: Path, head_timeout: float, body_timeout: float) -> tuple[subprocess.Popen, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"[serve]\nheader_timeout = {head_timeout}\nbody_timeout = {body_timeout}\n")
    env = {**os.environ, "MIBYAN_HOME": str(home), "OPENAI_API_KEY": "sk-bench-0123456789"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli.main", "serve", "--no-auth", "--port", "0",
         "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--toolsets", "files",
         "--workdir", str(home)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "running on http://" in line:
            return proc, line.split("running on ")[1].split()[0]
    raise RuntimeError("the gateway did not start")


async def slow_client(port: int, prefix: bytes, trickled: bytes, watch: float
                      ) -> tuple[float | None, bytes]:
    """Connect, send ``prefix`` at once, then ``trickled`` a byte a second: when the server
    closed the connection (None: still open after ``watch`` s), and what it answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    start, answer = time.monotonic(), b""
    writer.write(prefix)
    try:
        for byte in trickled:
            if time.monotonic() - start > watch:
                return None, answer
            try:
                chunk = await asyncio.wait_for(reader.read(65536), 1.0)
            except TimeoutError:
                writer.write(bytes([byte]))
                await writer.drain()
                continue
            answer += chunk
            if not chunk:
                return time.monotonic() - start, answer
        return None, answer
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - start, answer
    finally:
        writer.close()


def report(name: str, results: list[tuple[float | None, bytes]], watch: float) -> None:
    closed = [t for t, _ in results if t is not None]
    answered = sorted({a.split(b"\r\n", 1)[0].decode() for _, a in results if a})
    times = (f"median {statistics.median(closed):.1f} s, max {max(closed):.1f} s"
             if closed else "none closed")
    print(f"{name:12} {len(closed):4}/{len(results)} closed ({times}); "
          f"{len(results) - len(closed)} open after {watch:g} s; answers: "
          f"{', '.join(answered) or 'none'}")


async def slow_clients(url: str, clients: int, watch: float) -> None:
    port = int(url.rsplit(":", 1)[1])
    head = b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    body = json.dumps({"platform": "gateway", "pad": "x" * 200}).encode()
    runs = {
        "slow head": [slow_client(port, b"", head + b"X-Pad: " + b"a" * 200, watch)
                      for _ in range(clients)],
        "slow body": [slow_client(port, head + f"Content-Length: {len(body)}\r\n\r\n".encode(),
                                  body, watch) for _ in range(clients)],
        "silent": [silent(port, watch) for _ in range(clients)],
    }
    everything = asyncio.gather(*(asyncio.gather(*run) for run in runs.values()))
    await asyncio.sleep(2)
    async with httpx2.AsyncClient(timeout=30) as client:
        start = time.perf_counter()
        health = await client.get(f"{url}/health")
        took = (time.perf_counter() - start) * 1000
    print(f"/health with {3 * clients} slow clients hanging: {health.status_code} in "
          f"{took:.1f} ms")
    for name, results in zip(runs, await everything, strict=True):
        report(name, results, watch)


async def silent(port: int, watch: float) -> tuple[float | None, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    start = time.monotonic()
    try:
        chunk = await asyncio.wait_for(reader.read(65536), watch)
    except TimeoutError:
        return None, b""
    except ConnectionResetError:
        chunk = b""
    finally:
        writer.close()
    return time.monotonic() - start, chunk


def depth_check() -> None:
    """The guarded parse (``json_limits.parse``: UTF-8 check, parse, depth walk) against a
    bare ``json.loads``, on OpenAI-shaped bodies up to 25 MB."""
    message = {"role": "user", "content": "A message of about a hundred characters, with a "
               "[bracket] and a {brace} and a \"quote\"."}
    for count in (100, 10_000, 200_000):
        body = json.dumps({"model": "m", "messages": [message] * count}).encode()
        start = time.perf_counter()
        json.loads(body)
        bare = time.perf_counter() - start
        start = time.perf_counter()
        parse(body, max_depth=64)
        guarded = time.perf_counter() - start
        print(f"parse {len(body) / 1e6:6.2f} MB: json.loads {bare * 1000:8.2f} ms, guarded "
              f"{guarded * 1000:8.2f} ms (+{(guarded - bare) / bare * 100:.0f}%)")


def guard_cost(rounds: int = 20_000) -> None:
    """What the guard adds to a request (a 1 KB JSON body), in-process: the checks, the body
    read and handed on, against the app called directly."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 1000}]})
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [
        (b"host", b"127.0.0.1:8642"), (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode())]}

    async def app(scope: object, receive: object, send: object) -> None:
        await receive()  # type: ignore[operator]

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body.encode(), "more_body": False}

    async def send(message: object) -> None:
        return None

    async def timed(handler: object) -> float:
        start = time.perf_counter()
        for _ in range(rounds):
            await handler(scope, receive, send)  # type: ignore[operator]
        return (time.perf_counter() - start) / rounds * 1e6

    guarded = RequestGuard(app, ServeConfig(auth=False), Admission(1))
    bare, checked = asyncio.run(timed(app)), asyncio.run(timed(guarded))
    print(f"guard per request: {checked - bare:.1f} µs ({bare:.1f} µs bare, {checked:.1f} µs "
          "guarded)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--head-timeout", type=float, default=10.0)
    parser.add_argument("--body-timeout", type=float, default=30.0)
    parser.add_argument("--watch", type=float, default=40.0,
                        help="seconds to watch each client (the issue's measure: 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        proc, url = gateway(Path(scratch) / "home", args.head_timeout, args.body_timeout)
        try:
            print(f"mibyan serve --no-auth at {url}: header_timeout {args.head_timeout:g} s, "
                  f"body_timeout {args.body_timeout:g} s")
            asyncio.run(slow_clients(url, args.clients, args.watch))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    depth_check()
    guard_cost()


if __name__ == "__main__":
    main()
