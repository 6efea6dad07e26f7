"""mibyan gateway load bench: sessions held concurrently against the fake server, added
latency per turn, memory per idle session, and a bounded soak. Not part of the test suite.

    uv run python bench/serve.py            # levels 10, 100, 1000, soaks of waves and at a rate
    uv run python bench/serve.py --quick    # levels 10, 50 and short soaks
    uv run python bench/serve.py --max-busy 32 --levels 100   # the 503 limit at work
    uv run python bench/serve.py --levels 10 --soak-rate 5 --soak-seconds 120 --waves 0
    uv run python bench/serve.py --tree /tmp/base --levels 1000   # another checkout's gateway

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


def gateway(base_url: str, home: Path, max_busy: int | None = None, tree: Path = ROOT
            ) -> tuple[subprocess.Popen, str]:
    if max_busy is not None:
        (home / "config.toml").write_text(f"[serve]\nmax_busy = {max_busy}\n")
    env = {**os.environ, "MIBYAN_HOME": str(home), "OPENAI_API_KEY": "sk-bench-0123456789"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli.main", "serve", "--no-auth", "--port", "0", "--model",
         "m", "--base-url", base_url, "--durability", "flush", "--toolsets", "files",
         "--workdir", str(home)], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL,
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
# Sessions per client of the load: httpcore's pool walks (and probes) every connection it
# holds on each request, so one client for a thousand kept-alive connections makes the load
# itself slow enough to show in the turn times.
SESSIONS_PER_CLIENT = 20


class Clients:
    """Clients of the load, each holding the connections of a few sessions: a session's
    requests go through the same one (its connection is kept), a new session's to the next."""

    def __init__(self, n: int, **kwargs: object) -> None:
        self.clients = [httpx2.AsyncClient(**kwargs) for _ in range(n)]  # type: ignore[arg-type]
        self.next = 0

    def of(self, url: str) -> httpx2.AsyncClient:
        sid = url.partition("/v1/sessions/")[2].partition("/")[0]
        if sid:
            return self.clients[hash(sid) % len(self.clients)]
        self.next += 1
        return self.clients[self.next % len(self.clients)]

    async def post(self, url: str, json: object = None) -> httpx2.Response:
        return await self.of(url).post(url, json=json)

    async def delete(self, url: str) -> httpx2.Response:
        return await self.of(url).delete(url)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


async def post(client: Clients, url: str, body: object
               ) -> tuple[httpx2.Response, float]:
    """A POST, sent again after a connection the server dropped before answering (a
    connection refused or reset while the listen queue overflowed), as the SDKs do; and after
    a 503 ``server_busy`` (``[serve] max_busy``), once its ``retry-after-ms`` or else its
    ``Retry-After`` has passed, as the openai SDKs do too; and after a 408 (the gateway's guard
    stopped waiting for the request's head or body). All are counted in the report. The
    answer, and the time of the attempt that got it (an admitted turn's own time)."""
    attempt = 0
    while True:
        sent = time.perf_counter()
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
            return response, time.perf_counter() - sent
        RETRIES["busy"] += 1
        told = response.headers.get("retry-after-ms")
        await asyncio.sleep(float(told) / 1000 if told is not None
                            else float(response.headers.get("retry-after", "1")))


ADMITTED: list[float] = []  # each turn's admitted attempt's time, in order


async def turn(client: Clients, url: str, sid: str) -> float:
    """One turn of session ``sid``; its time as the client sees it, from the first send of its
    request (a wait after a 503 included) to the answer."""
    start = time.perf_counter()
    response, admitted = await post(client, f"{url}/v1/sessions/{sid}/messages",
                                    {"content": MESSAGE})
    response.raise_for_status()
    ADMITTED.append(admitted)
    return time.perf_counter() - start


async def session_turns(client: Clients, url: str, sessions: list[str], turns: int
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


async def create(client: Clients, url: str, n: int) -> list[str]:
    limit = asyncio.Semaphore(50)

    async def one() -> str:
        async with limit:
            response, _ = await post(client, f"{url}/v1/sessions", None)
            response.raise_for_status()
            return response.json()["id"]
    return list(await asyncio.gather(*(one() for _ in range(n))))


async def delete(client: Clients, url: str, sessions: list[str]) -> None:
    limit = asyncio.Semaphore(50)

    async def one(sid: str) -> None:
        async with limit:
            (await client.delete(f"{url}/v1/sessions/{sid}")).raise_for_status()
    await asyncio.gather(*(one(s) for s in sessions))


async def level(client: Clients, url: str, home: Path, pid: int, n: int,
                turns: int) -> dict:
    before = rss_mb(pid)
    sessions = await create(client, url, n)
    await session_turns(client, url, sessions, 1)  # each session has a turn behind it
    idle = rss_mb(pid)
    busy, timeouts = RETRIES["busy"], RETRIES["timeout"]
    ADMITTED.clear()
    started = time.perf_counter()
    times = await session_turns(client, url, sessions, turns)
    elapsed = time.perf_counter() - started
    admitted = list(ADMITTED)
    await delete(client, url, sessions)
    walls = [t for ts in times.values() for t in ts]
    extra, failed = added(home, times)
    return {"n": n, "turns": len(walls), "p50": pct(walls, 0.5), "p99": pct(walls, 0.99),
            "added_p50": pct(extra, 0.5), "added_p99": pct(extra, 0.99),
            "idle_kb": (idle - before) * 1024 / n, "failed": failed,
            "rate": len(walls) / elapsed, "refused": RETRIES["busy"] - busy,
            "timeouts": RETRIES["timeout"] - timeouts,
            "admitted_p50": pct(admitted, 0.5), "admitted_p99": pct(admitted, 0.99)}


async def paced(client: Clients, url: str, pid: int, rate: float, seconds: float,
                sessions: int, lifetime: int = 0) -> dict:
    """An open-loop soak: a turn every ``1 / rate`` seconds for ``seconds``, each on the next
    of ``sessions`` sessions that is not in a turn (a fixed arrival rate, as many users make,
    rather than turns sent back to back); the gateway's RSS every tenth of the run. With a
    ``lifetime``, a session that has had that many turns is deleted and a new one takes its
    place (users come and go; a session kept open the whole run holds its growing history)."""
    ids = await create(client, url, sessions)
    free: asyncio.Queue[str] = asyncio.Queue()
    for sid in ids:
        free.put_nowait(sid)
    times: list[float] = []
    samples: list[tuple[float, float, int]] = []
    busy, skipped, tasks = RETRIES["busy"], 0, []
    had: dict[str, int] = {}

    async def one(sid: str) -> None:
        try:
            times.append(await turn(client, url, sid))
            had[sid] = had.get(sid, 0) + 1
            if lifetime and had[sid] >= lifetime:
                await delete(client, url, [sid])
                ids.remove(sid)
                sid = (await create(client, url, 1))[0]
                ids.append(sid)
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
            "lifetime": lifetime,
            "p50": pct(times, 0.5), "p99": pct(times, 0.99),
            "refused": RETRIES["busy"] - busy, "samples": samples}


async def soak(client: Clients, url: str, pid: int, waves: int, sessions: int,
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
           elapsed: float, max_busy: int | None, tree: Path) -> None:
    print(f"# mibyan serve bench ({os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"{elapsed:.0f} s, [serve] max_busy {max_busy or 'default'}, gateway of {tree})\n")
    print("| sessions | turns | turns/s | turn p50 ms | turn p99 ms | admitted p50 ms | "
          "admitted p99 ms | added p50 ms | added p99 ms | 503s | 408s | upstream failures | "
          "idle KB/session |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in levels:
        print(f"| {r['n']} | {r['turns']} | {r['rate']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} | "
              f"{r['admitted_p50']:.0f} | {r['admitted_p99']:.0f} | "
              f"{r['added_p50']:.0f} | {r['added_p99']:.0f} | {r['refused']} | "
              f"{r['timeouts']} | {r['failed']} | {r['idle_kb']:.0f} |")
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
              "session busy)" + (f"; each session replaced after {soaked['lifetime']} turns"
                                 if soaked["lifetime"] else ""))
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
        gw, url = gateway(base_url, Path(tmp), args.max_busy, args.tree)
        try:
            # Idle connections are dropped before the server's keep-alive (75 s) ends, so
            # that no request is sent on a connection the server is closing.
            limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None,
                                  keepalive_expiry=60.0)
            clients = max((*args.levels, args.soak_sessions)) // SESSIONS_PER_CLIENT + 1
            client = Clients(clients, limits=limits, timeout=300)
            try:
                await level(client, url, Path(tmp), gw.pid, 5, 2)  # warm-up
                levels = [await level(client, url, Path(tmp), gw.pid, n,
                                      args.turns if n < 500 else 2)
                          for n in args.levels]
                samples = await soak(client, url, gw.pid, args.waves, args.soak_sessions,
                                     args.soak_turns)
                soaked = (await paced(client, url, gw.pid, args.soak_rate, args.soak_seconds,
                                      args.soak_sessions, args.soak_lifetime)
                          if args.soak_seconds else None)
            finally:
                await client.aclose()
        finally:
            gw.terminate()
            gw.wait(timeout=60)
            assert up.stdin is not None
            up.stdin.close()
            up.wait(timeout=10)
    report(levels, samples, soaked, time.monotonic() - started, args.max_busy, args.tree)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--levels", type=lambda t: tuple(int(n) for n in t.split(",")),
                        help="concurrent sessions per level, comma-separated")
    parser.add_argument("--max-busy", type=int, help="[serve] max_busy of the gateway")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="the checkout whose gateway runs (another commit's, to compare)")
    parser.add_argument("--waves", type=int, help="waves of the soak of made sessions")
    parser.add_argument("--soak-rate", type=float, default=5.0,
                        help="turns per second of the soak at a fixed rate")
    parser.add_argument("--soak-seconds", type=float,
                        help="length of the soak at a fixed rate (0: none)")
    parser.add_argument("--soak-lifetime", type=int, default=0,
                        help="turns a session of the soak at a fixed rate has before it is "
                             "deleted and replaced (0: kept the whole soak)")
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
