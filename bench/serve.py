"""mibyan gateway load bench: sessions held concurrently against the fake server, added
latency per turn, memory per idle session, and a bounded soak. Not part of the test suite.

    uv run python bench/serve.py            # levels 10, 100, 1000, soaks of waves and at a rate
    uv run python bench/serve.py --quick    # levels 10, 50 and short soaks
    uv run python bench/serve.py --max-busy 32 --levels 100   # the 503 limit at work
    uv run python bench/serve.py --levels 10 --soak-rate 5 --soak-seconds 120 --waves 0

Three processes: the fake OpenAI server, ``mibyan serve`` (its RSS and open files are read from
/proc), and this one, the load (asyncio + httpx2). See bench/README.md for what each figure
means.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from effects.eventlog.store import read_envelopes, session_path  # noqa: E402

REPLY = "The gateway answers with a reply of about four hundred characters. " * 6
MESSAGE = "A user message of a realistic size, about two hundred characters long. " * 3

UPSTREAM = f"""
import sys
import tests.fake_http
from tests.fake_openai import FakeOpenAIServer, Reply

# The gateway holds hundreds of connections to it: a listen queue of 128 would overflow.
tests.fake_http._HTTPServer.request_queue_size = 4096


class Forgetful(FakeOpenAIServer):
    def _record(self, body, headers):  # keeps no request bodies: the soak must not grow here
        return self.default if body is not None else None


with Forgetful(default=Reply.text({REPLY!r})) as srv:
    print(srv.base_url, flush=True)
    sys.stdin.read()
"""


def upstream() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", UPSTREAM], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def gateway(base_url: str, home: Path, max_busy: int | None = None
            ) -> tuple[subprocess.Popen, str]:
    if max_busy is not None:
        (home / "config.toml").write_text(f"[serve]\nmax_busy = {max_busy}\n")
    env = {**os.environ, "MIBYAN_HOME": str(home), "OPENAI_API_KEY": "sk-bench-0123456789"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli.main", "serve", "--no-auth", "--port", "0", "--model",
         "m", "--base-url", base_url, "--durability", "flush", "--toolsets", "files",
         "--workdir", str(home)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "running on http://" in line:
            url = line.split("running on ")[1].split()[0]
            threading.Thread(target=lambda: [sys.stderr.write(f"gateway: {line}")
                                             for line in proc.stderr or ()],
                             daemon=True).start()  # the gateway's complaints, if any
            return proc, url
    raise RuntimeError("the gateway did not start")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


RETRIES = {"count": 0, "busy": 0, "timeout": 0}


async def post(client: httpx2.AsyncClient, url: str, body: object) -> httpx2.Response:
    """A POST, sent again after a connection the server dropped before answering (a
    connection refused or reset while the listen queue overflowed), as the SDKs do; and after
    a 503 ``server_busy`` (``[serve] max_busy``), once its ``Retry-After`` has passed, as the
    SDKs do too; and after a 408 (the gateway's guard stopped waiting for the request's head
    or body). All are counted in the report."""
    attempt = 0
    while True:
        try:
            response = await client.post(url, json=body)
        except (httpx2.ConnectError, httpx2.ReadError, httpx2.RemoteProtocolError):
            attempt += 1
            if attempt == 5:
                raise
            RETRIES["count"] += 1
            await asyncio.sleep(0.1 * attempt)
            continue
        if response.status_code == 408:  # the gateway's guard gave up reading the request
            RETRIES["timeout"] += 1      # (a starved event loop); the SDKs send it again
            continue
        if response.status_code != 503:
            return response
        RETRIES["busy"] += 1
        await asyncio.sleep(float(response.headers.get("retry-after", "1")))


async def turn(client: httpx2.AsyncClient, url: str, sid: str) -> float:
    """One turn of session ``sid``; its time as the client sees it, from the first send of its
    request (a wait after a 503 included) to the answer."""
    start = time.perf_counter()
    response = await post(client, f"{url}/v1/sessions/{sid}/messages", {"content": MESSAGE})
    response.raise_for_status()
    return time.perf_counter() - start


async def session_turns(client: httpx2.AsyncClient, url: str, sessions: list[str], turns: int
                        ) -> dict[str, list[float]]:
    """Each session's turn times (seconds, in order), the sessions all at once."""
    async def one(sid: str) -> list[float]:
        return [await turn(client, url, sid) for _ in range(turns)]
    times = await asyncio.gather(*(one(s) for s in sessions))
    return dict(zip(sessions, times, strict=True))


def added(home: Path, times: dict[str, list[float]]) -> tuple[list[float], int]:
    """Per turn: the client's wall time minus the model call's, as the session's log has it
    (``ModelReplied.latency_ms``: the upstream's time, network included); and how many model
    calls failed (and were retried by the agent: their time counts as added)."""
    out, failed = [], 0
    for sid, walls in times.items():
        envelopes = list(read_envelopes(session_path(home / "sessions", sid)))
        calls = [e.payload["latency_ms"] / 1000 for e in envelopes if e.kind == "model_replied"]
        failed += sum(e.kind == "model_failed" for e in envelopes)
        out += [wall - call for wall, call in zip(walls, calls[-len(walls):], strict=True)]
    return out, failed


async def create(client: httpx2.AsyncClient, url: str, n: int) -> list[str]:
    limit = asyncio.Semaphore(50)

    async def one() -> str:
        async with limit:
            response = await post(client, f"{url}/v1/sessions", None)
            response.raise_for_status()
            return response.json()["id"]
    return list(await asyncio.gather(*(one() for _ in range(n))))


async def delete(client: httpx2.AsyncClient, url: str, sessions: list[str]) -> None:
    limit = asyncio.Semaphore(50)

    async def one(sid: str) -> None:
        async with limit:
            (await client.delete(f"{url}/v1/sessions/{sid}")).raise_for_status()
    await asyncio.gather(*(one(s) for s in sessions))


async def level(client: httpx2.AsyncClient, url: str, home: Path, pid: int, n: int,
                turns: int) -> dict:
    before = rss_mb(pid)
    sessions = await create(client, url, n)
    await session_turns(client, url, sessions, 1)  # each session has a turn behind it
    idle = rss_mb(pid)
    busy = RETRIES["busy"]
    started = time.perf_counter()
    times = await session_turns(client, url, sessions, turns)
    elapsed = time.perf_counter() - started
    await delete(client, url, sessions)
    walls = [t for ts in times.values() for t in ts]
    extra, failed = added(home, times)
    return {"n": n, "turns": len(walls), "p50": pct(walls, 0.5), "p99": pct(walls, 0.99),
            "added_p50": pct(extra, 0.5), "added_p99": pct(extra, 0.99),
            "idle_kb": (idle - before) * 1024 / n, "failed": failed,
            "rate": len(walls) / elapsed, "refused": RETRIES["busy"] - busy}


async def paced(client: httpx2.AsyncClient, url: str, pid: int, rate: float, seconds: float,
                sessions: int) -> dict:
    """An open-loop soak: a turn every ``1 / rate`` seconds for ``seconds``, each on the next
    of ``sessions`` sessions that is not in a turn (a fixed arrival rate, as many users make,
    rather than turns sent back to back); the gateway's RSS every tenth of the run."""
    ids = await create(client, url, sessions)
    free: asyncio.Queue[str] = asyncio.Queue()
    for sid in ids:
        free.put_nowait(sid)
    times: list[float] = []
    samples: list[tuple[float, float, int]] = []
    busy, skipped, tasks = RETRIES["busy"], 0, []

    async def one(sid: str) -> None:
        try:
            times.append(await turn(client, url, sid))
        finally:
            free.put_nowait(sid)
    start = time.perf_counter()
    due = start
    step = max(seconds / 10, 1.0)
    next_sample = start
    while (now := time.perf_counter()) < start + seconds:
        if now >= next_sample:
            samples.append((now - start, rss_mb(pid), open_files(pid)))
            next_sample += step
        if now < due:
            await asyncio.sleep(min(due - now, 0.05))
            continue
        due += 1 / rate
        if free.empty():  # every session is in a turn: the gateway is behind the rate
            skipped += 1
            continue
        tasks.append(asyncio.ensure_future(one(free.get_nowait())))
    await asyncio.gather(*tasks)
    samples.append((time.perf_counter() - start, rss_mb(pid), open_files(pid)))
    await delete(client, url, ids)
    return {"rate": rate, "seconds": seconds, "turns": len(times), "skipped": skipped,
            "p50": pct(times, 0.5), "p99": pct(times, 0.99),
            "refused": RETRIES["busy"] - busy, "samples": samples}


async def soak(client: httpx2.AsyncClient, url: str, pid: int, waves: int, sessions: int,
               turns: int) -> list[tuple[int, float, int]]:
    """Waves of sessions made, used and closed: (turns so far, RSS MB, open files) after
    each wave."""
    samples, done = [], 0
    for _ in range(waves):
        ids = await create(client, url, sessions)
        done += sum(map(len, (await session_turns(client, url, ids, turns)).values()))
        await delete(client, url, ids)
        samples.append((done, rss_mb(pid), open_files(pid)))
    return samples


def report(levels: list[dict], samples: list[tuple[int, float, int]], soaked: dict | None,
           elapsed: float, max_busy: int | None) -> None:
    print(f"# mibyan serve bench ({os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"{elapsed:.0f} s, [serve] max_busy {max_busy or 'default'})\n")
    print("| sessions | turns | turns/s | turn p50 ms | turn p99 ms | added p50 ms | "
          "added p99 ms | 503s | upstream failures | idle KB/session |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in levels:
        print(f"| {r['n']} | {r['turns']} | {r['rate']:.1f} | {r['p50']:.1f} | {r['p99']:.1f} | "
              f"{r['added_p50']:.1f} | {r['added_p99']:.1f} | {r['refused']} | {r['failed']} | "
              f"{r['idle_kb']:.0f} |")
    if samples:
        print("\nsoak in waves (after each wave: turns, RSS MB, open files):")
        for done, rss, files in samples:
            print(f"  {done:6d} turns  {rss:7.1f} MB  {files:4d} files")
        settled = samples[len(samples) // 2:]
        growth = settled[-1][1] - settled[0][1]
        print(f"growth over the second half: {growth:+.1f} MB, "
              f"{settled[-1][2] - settled[0][2]:+d} open files")
    if soaked:
        print(f"\nsoak at a fixed rate: {soaked['rate']:g} turns/s for {soaked['seconds']:g} s: "
              f"{soaked['turns']} turns, p50 {soaked['p50']:.0f} ms, p99 {soaked['p99']:.0f} ms, "
              f"{soaked['refused']} 503s, {soaked['skipped']} arrivals skipped (every "
              "session busy)")
        for at, rss, files in soaked["samples"]:
            print(f"  {at:7.1f} s  {rss:7.1f} MB  {files:4d} files")
        half = soaked["samples"][len(soaked["samples"]) // 2:]
        print(f"growth over the second half: {half[-1][1] - half[0][1]:+.1f} MB, "
              f"{half[-1][2] - half[0][2]:+d} open files")
    print(f"requests sent again after a dropped connection: {RETRIES['count']}; "
          f"after a 503: {RETRIES['busy']}; after a 408: {RETRIES['timeout']}")


async def main(args: argparse.Namespace) -> None:
    started = time.monotonic()
    up, base_url = upstream()
    with tempfile.TemporaryDirectory(prefix="mibyan-serve-bench-") as tmp:
        gw, url = gateway(base_url, Path(tmp), args.max_busy)
        try:
            # Idle connections are dropped before the server's keep-alive (75 s) ends, so
            # that no request is sent on a connection the server is closing.
            limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None,
                                  keepalive_expiry=60.0)
            async with httpx2.AsyncClient(limits=limits, timeout=300) as client:
                await level(client, url, Path(tmp), gw.pid, 5, 2)  # warm-up
                levels = [await level(client, url, Path(tmp), gw.pid, n,
                                      args.turns if n < 500 else 2)
                          for n in args.levels]
                samples = await soak(client, url, gw.pid, args.waves, args.soak_sessions,
                                     args.soak_turns)
                soaked = (await paced(client, url, gw.pid, args.soak_rate, args.soak_seconds,
                                      args.soak_sessions) if args.soak_seconds else None)
        finally:
            gw.terminate()
            gw.wait(timeout=60)
            assert up.stdin is not None
            up.stdin.close()
            up.wait(timeout=10)
    report(levels, samples, soaked, time.monotonic() - started, args.max_busy)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--levels", type=lambda t: tuple(int(n) for n in t.split(",")),
                        help="concurrent sessions per level, comma-separated")
    parser.add_argument("--max-busy", type=int, help="[serve] max_busy of the gateway")
    parser.add_argument("--waves", type=int, help="waves of the soak of made sessions")
    parser.add_argument("--soak-rate", type=float, default=5.0,
                        help="turns per second of the soak at a fixed rate")
    parser.add_argument("--soak-seconds", type=float,
                        help="length of the soak at a fixed rate (0: none)")
    options = parser.parse_args()
    chosen, waves, seconds = options.levels, options.waves, options.soak_seconds
    if options.quick:
        options.levels, options.turns, options.waves = (10, 50), 3, 4
        options.soak_sessions, options.soak_turns, options.soak_seconds = 20, 5, 20
    else:
        # 1,000 sessions (and 500) send 2 turns each, not 5: a level stays within minutes.
        options.levels, options.turns, options.waves = (10, 100, 1000), 5, 10
        # 120 s at 5 turns/s: 600 turns, ten minutes of a chat that sends a turn a second.
        options.soak_sessions, options.soak_turns, options.soak_seconds = 20, 10, 120
    options.levels = chosen or options.levels
    options.waves = options.waves if waves is None else waves
    options.soak_seconds = options.soak_seconds if seconds is None else seconds
    asyncio.run(main(options))
