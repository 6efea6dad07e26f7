"""mibyan benchmark: local overhead against the raw ``openai`` SDK, import time, memory,
event-log and replay throughput. Not part of the test suite.

    uv run python bench/bench.py              # the full report (1.5-2.5 min, 2 busy cores)
    uv run python bench/bench.py --quick      # fewer turns, a smoke run
    uv run python bench/bench.py --profile 2000   # cProfile of mibyan's turn path at 2,000 msgs

See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fake_openai import FakeOpenAIServer, Reply  # noqa: E402

# --- workload -------------------------------------------------------------------------------------

MESSAGE_CHARS = 400
SIZES = (0, 200, 2000)
# History size: (warm-up turns, epochs, turns per epoch); see ``schedule``.
TURNS = {0: (5, 40, 0), 200: (2, 4, 8), 2000: (1, 3, 4)}
QUICK_TURNS = {0: (2, 10, 0), 200: (1, 2, 3), 2000: (1, 1, 2)}
STREAM_PIECE = 4  # characters per streamed content chunk (about one token, like real providers)
TARGETS = {0: 0.8, 200: 0.2, 2000: 0.05}
API_KEY = "sk-bench"
WORKER_TIMEOUT = 240  # seconds; a worker past it dumps its stacks and exits
MODEL = "m"

_LOREM = ("The quick brown fox jumps over the lazy dog while the agent loop reads its event log "
          "and replays every stage of the session from the first record to the last. ")


def text(i: int, chars: int = MESSAGE_CHARS) -> str:
    """A distinct ~``chars``-character message (distinct so nothing can be deduplicated)."""
    head = f"[{i}] "
    body = (_LOREM * (chars // len(_LOREM) + 2))[: chars - len(head)]
    return head + body


def prior_history(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text(i)} for i in range(n)]


REPLY_TEXT = text(-1)


class BenchServer(FakeOpenAIServer):
    """The in-tree fake server, minus request retention (which would grow the heap by the whole
    history on every call), plus exact accounting: ``settled(n)`` returns once ``n`` requests
    have added their handler time, so a turn's server time is never attributed to the next
    (``server_seconds`` is added after the response is written, racing the client)."""

    def __init__(self, default: Reply) -> None:
        super().__init__(default=default)
        self._cond = threading.Condition(self._lock)
        self.done = 0
        self.received = 0  # kept by the client: requests it has made

    def _record(self, body, headers):
        with self._lock:
            if body is None:
                return None
            if self._queue:
                return self._queue.popleft()
            return self.default

    def _add_seconds(self, dt: float) -> None:
        with self._cond:
            self._seconds += dt
            self.done += 1
            self._cond.notify_all()

    def settled(self, n: int) -> float:
        """Wait until ``n`` requests are fully accounted; return the cumulative handler time."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.done >= n, timeout=30):
                raise RuntimeError(f"fake server: {self.done}/{n} requests accounted")
            return self._seconds


def bench_server() -> BenchServer:
    return BenchServer(default=Reply.text(REPLY_TEXT, piece_size=STREAM_PIECE))


def worker_server() -> None:
    """Host a BenchServer for another process: print its base URL, then answer ``wait N``
    with the cumulative handler time once N requests are accounted, until ``quit``."""
    with bench_server() as srv:
        print(srv.base_url, flush=True)
        for line in sys.stdin:
            command, *arg = line.split()
            if command == "quit":
                break
            print(repr(srv.settled(int(arg[0]))), flush=True)


class RemoteServer:
    """The client side of :func:`worker_server`: the same ``base_url``/``settled`` interface,
    with the server in a process of its own (no GIL or garbage collector shared with the loop
    under test). ``received`` counts requests on the client side: every turn makes one."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", "server"], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        self.base_url = self.proc.stdout.readline().strip()
        self.received = 0

    def settled(self, n: int) -> float:
        self.proc.stdin.write(f"wait {n}\n")
        return float(self.proc.stdout.readline())

    def __enter__(self) -> RemoteServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


# --- the loops under test -------------------------------------------------------------------------


class RawLoop:
    """What a user writes by hand on the official SDK: one client, a list of dicts."""

    def __init__(self, srv: Any, prior: list[dict], *, stream: bool) -> None:
        import openai
        self.client = openai.OpenAI(base_url=srv.base_url, api_key=API_KEY, max_retries=0)
        self.prior = prior
        self.history: list[dict] = []
        self.stream = stream

    def turn(self, message: str, *, reset: bool = False) -> None:
        if reset:
            self.history = [dict(m) for m in self.prior]
        self.history.append({"role": "user", "content": message})
        if self.stream:
            parts = []
            for chunk in self.client.chat.completions.create(
                    model=MODEL, messages=self.history, stream=True,
                    stream_options={"include_usage": True}):
                if chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
            content = "".join(parts)
        else:
            reply = self.client.chat.completions.create(model=MODEL, messages=self.history)
            content = reply.choices[0].message.content
        assert content == REPLY_TEXT
        self.history.append({"role": "assistant", "content": content})

    def close(self) -> None:
        self.client.close()


class FloorLoop:
    """The physical floor: a bare ``httpx2`` loop doing the same requests as mibyan (the body
    encoded with ``json.dumps``, the reply parsed with ``json.loads``, SSE lines split by hand),
    keeping its history as a list of dicts and persisting nothing."""

    def __init__(self, srv: Any, prior: list[dict], *, stream: bool) -> None:
        import httpx2
        self.http = httpx2.Client()
        self.url = srv.base_url.rstrip("/") + "/chat/completions"
        self.headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
        self.prior = prior
        self.history: list[dict] = []
        self.stream = stream

    def turn(self, message: str, *, reset: bool = False) -> None:
        if reset:
            self.history = [dict(m) for m in self.prior]
        self.history.append({"role": "user", "content": message})
        body: dict[str, Any] = {"model": MODEL, "messages": self.history}
        if self.stream:
            body.update(stream=True, stream_options={"include_usage": True})
            parts = []
            with self.http.stream("POST", self.url, content=json.dumps(body).encode(),
                                  headers=self.headers) as response:
                for line in response.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                        parts.append(chunk["choices"][0]["delta"]["content"])
            content = "".join(parts)
        else:
            response = self.http.post(self.url, content=json.dumps(body).encode(),
                                      headers=self.headers)
            content = json.loads(response.content)["choices"][0]["message"]["content"]
        assert content == REPLY_TEXT
        self.history.append({"role": "assistant", "content": content})

    def close(self) -> None:
        self.http.close()


class MibyanLoop:
    """``Agent.run_conversation`` on one session: a reset turn passes the prior history in
    (``conversation_history=``, which replaces the session's); the turns after it let the
    session grow its own history."""

    def __init__(self, srv: Any, prior: list[dict], *, stream: bool, durability: str,
                 home: Path) -> None:
        from pipeline.agent import Agent
        # --window (through the environment, to the workers): a model window the history fits
        # in, so that a turn handed 2,000 messages is not also a compression.
        window = os.environ.get("MIBYAN_BENCH_WINDOW")
        self.agent = Agent(model=MODEL, base_url=srv.base_url, api_key=API_KEY, home=home,
                           durability=durability, stream=stream,
                           **({"context_length": int(window)} if window else {}))
        self.prior = prior

    def turn(self, message: str, *, reset: bool = False) -> None:
        result = self.agent.run_conversation(
            message, conversation_history=self.prior if reset else None)
        assert result["completed"] and result["api_calls"] == 1, result["turn_exit_reason"]
        assert result["final_response"] == REPLY_TEXT

    def close(self) -> None:
        self.agent.close()


VARIANTS = {
    # name: (factory, description)
    "floor": (lambda srv, prior, home: FloorLoop(srv, prior, stream=False),
              "bare httpx2 loop, non-streaming: the physical floor"),
    "floor/stream": (lambda srv, prior, home: FloorLoop(srv, prior, stream=True),
                     "bare httpx2 loop, stream=True, include_usage"),
    "raw": (lambda srv, prior, home: RawLoop(srv, prior, stream=False),
            "openai SDK loop, non-streaming"),
    "mibyan/flush": (lambda srv, prior, home: MibyanLoop(srv, prior, stream=False,
                                                         durability="flush", home=home),
                     "Agent(stream=False, durability='flush')"),
    "mibyan/durable": (lambda srv, prior, home: MibyanLoop(srv, prior, stream=False,
                                                           durability="durable", home=home),
                       "Agent(stream=False, durability='durable'): fsync at every turn end"),
    "raw/stream": (lambda srv, prior, home: RawLoop(srv, prior, stream=True),
                   "openai SDK loop, stream=True, include_usage"),
    "mibyan/stream": (lambda srv, prior, home: MibyanLoop(srv, prior, stream=True,
                                                          durability="flush", home=home),
                      "Agent(stream=True, durability='flush')"),
}


def schedule(size: int, warmup: int, epochs: int, per_epoch: int) -> list[tuple[bool, str | None]]:
    """The turns every variant runs: ``(reset, sample)`` pairs. A reset turn starts over from
    the N-message prior history (mibyan: ``conversation_history=prior``; raw: a fresh copy of
    the list), so the history stays near N instead of drifting up by two messages a turn; the
    turns after it continue the conversation. At N=0 every turn is a reset (a one-shot
    conversation). ``sample`` names the series a measured turn goes to (None: warm-up)."""
    if size == 0:
        return [(True, None)] * (1 + warmup) + [(True, "turn")] * epochs
    plan: list[tuple[bool, str | None]] = [(True, None)] + [(False, None)] * warmup
    for _ in range(epochs):
        plan += [(True, "reset")] + [(False, "turn")] * per_epoch
    return plan


def worker_overhead(size: int, plan: list[tuple[bool, str | None]], variants: list[str],
                    remote: bool) -> dict:
    """Run every variant turn by turn (round-robin, rotating order) against one fake server;
    return each variant's per-turn local overhead in seconds (wall minus server time)."""
    import gc
    fsync_seconds = [0.0]
    real_fsync = os.fsync

    def timed_fsync(fd: int) -> None:  # the event log calls os.fsync; time it where it runs
        t0 = time.perf_counter()
        try:
            real_fsync(fd)
        finally:
            fsync_seconds[0] += time.perf_counter() - t0

    os.fsync = timed_fsync
    home = Path(tempfile.mkdtemp(prefix="mibyan-bench-"))
    try:
        with (RemoteServer() if remote else bench_server()) as srv:
            prior = prior_history(size)
            loops = {name: VARIANTS[name][0](srv, prior, home) for name in variants}
            gc.collect()
            samples: dict = {name: {"turn": [], "reset": [], "server": [], "fsync": [],
                                    "cpu": [], "reset_cpu": []} for name in variants}
            order = list(variants)
            for index, (reset, sample) in enumerate(plan):
                order = order[1:] + order[:1]
                for name in order:
                    expected = srv.received + 1
                    s0 = srv.settled(srv.received)
                    f0 = fsync_seconds[0]
                    c0, t0 = time.process_time(), time.perf_counter()
                    loops[name].turn(text(100_000 + index), reset=reset)
                    t1, c1 = time.perf_counter(), time.process_time()
                    srv.received = expected  # every turn is one request (the loops assert it)
                    s1 = srv.settled(expected)
                    if sample is not None:
                        samples[name][sample].append((t1 - t0) - (s1 - s0))
                        if sample == "reset":
                            samples[name]["reset_cpu"].append(c1 - c0)
                        if sample == "turn":
                            samples[name]["server"].append(s1 - s0)
                            samples[name]["fsync"].append(fsync_seconds[0] - f0)
                            samples[name]["cpu"].append(c1 - c0)
            for loop in loops.values():
                loop.close()
    finally:
        os.fsync = real_fsync
        shutil.rmtree(home, ignore_errors=True)
    return samples


def _package(filename: str, name: str) -> str:
    """Who a profiled function belongs to: a site-packages distribution, a mibyan layer, the
    standard library, built-ins, or socket I/O (which includes waiting for the server)."""
    if filename == "~" and "_socket.socket" in name:
        return "socket send/recv (waits)"
    path = filename.replace(os.sep, "/")
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    root = str(ROOT).replace(os.sep, "/") + "/"
    if path.startswith(root):
        return "mibyan:" + path[len(root):].split("/", 1)[0]
    return "builtins" if path == "~" else "stdlib"


def worker_profile(size: int, turns: int) -> None:
    """cProfile ``turns`` mibyan turns at ``size`` prior messages (fake server in its own
    process, so its work stays out of the profile); print time by package and the top
    functions."""
    import cProfile
    import pstats
    home = Path(tempfile.mkdtemp(prefix="mibyan-bench-"))
    try:
        with RemoteServer() as srv:
            loop = MibyanLoop(srv, prior_history(size), stream=False, durability="flush", home=home)
            for i in range(3):
                loop.turn(text(i), reset=(i == 0 or size == 0))
            profiler = cProfile.Profile()
            t0 = time.perf_counter()
            profiler.enable()
            for i in range(turns):
                loop.turn(text(1000 + i), reset=(size == 0))
            profiler.disable()
            wall = time.perf_counter() - t0
            loop.close()
        stats = pstats.Stats(profiler)
        by_package: dict[str, float] = {}
        raw_stats: dict = stats.stats  # type: ignore[attr-defined]
        for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in raw_stats.items():
            key = _package(filename, name)
            by_package[key] = by_package.get(key, 0.0) + tottime
        total = sum(by_package.values())
        print(f"cProfile of {turns} mibyan/flush turns at {size} prior messages: "
              f"{wall * 1000 / turns:.2f} ms/turn wall under the profiler (server in another "
              "process; socket waits show as recv)")
        print("\nown time by package (ms per turn, share):")
        for key, value in sorted(by_package.items(), key=lambda kv: -kv[1]):
            if value / total >= 0.005:
                print(f"  {key:28} {value * 1000 / turns:7.3f}  {value / total:6.1%}")
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(r"/(pipeline|effects|stages)/", 40)
    finally:
        shutil.rmtree(home, ignore_errors=True)


# --- memory ---------------------------------------------------------------------------------------


def worker_memory(base_url: str, kind: str, size: int, turns: int, trace: bool) -> dict:
    """A session in a process of its own (the fake server runs in the parent)."""
    import gc
    import resource
    import tracemalloc

    srv = argparse.Namespace(base_url=base_url)
    home = Path(tempfile.mkdtemp(prefix="mibyan-bench-"))
    try:
        import openai  # noqa: F401 - both loops need it; count it in the baseline

        import pipeline.agent  # noqa: F401
        gc.collect()
        rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        prior = prior_history(size)
        if trace:
            tracemalloc.start()
        if kind == "mibyan":
            loop = MibyanLoop(srv, prior, stream=False, durability="flush", home=home)
        else:
            loop = RawLoop(srv, prior, stream=False)
        del prior
        for i in range(turns):
            loop.turn(text(100_000 + i), reset=(i == 0))
        out = {"rss_imports": rss_imports,
               "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        if trace:
            current, peak = tracemalloc.get_traced_memory()
            out.update(traced_current=current, traced_peak=peak)
            tracemalloc.stop()
        loop.close()
        return out
    finally:
        shutil.rmtree(home, ignore_errors=True)


# --- event log ------------------------------------------------------------------------------------


def sample_event():
    from stages.log.events import ModelReplied, Usage
    from stages.log.messages import Message
    return ModelReplied(
        message=Message(role="assistant", content="It is sunny in Oslo today."),
        finish_reason="stop", usage=Usage(input_tokens=1234, output_tokens=56),
        model="gpt-4o-mini", latency_ms=812.345)


def bench_eventlog(n_flush: int, n_durable: int) -> dict:
    from effects.clock import SystemClock
    from effects.eventlog.codec import to_payload
    from effects.eventlog.envelope import encode_line
    from effects.eventlog.store import SessionLog
    from pipeline.shell.journal import LiveJournal

    event = sample_event()
    payload = to_payload(event)
    payload_bytes = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False))
    line_bytes = len(encode_line("s", 0, event.kind, 1, SystemClock().now(), "0" * 64, payload)) + 1
    recorded_at = SystemClock().now()
    out: dict = {"payload_bytes": payload_bytes, "line_bytes": line_bytes}
    root = Path(tempfile.mkdtemp(prefix="mibyan-bench-log-"))
    try:
        logs = {
            (durability, path): SessionLog.open(root, f"{durability}-{path}", durability=durability)
            for durability in ("flush", "durable") for path in ("append", "record")}
        journals = {key: LiveJournal(log, SystemClock(), (API_KEY,)) for key, log in logs.items()}
        for log in logs.values():
            log.append("session_started", 1, {}, recorded_at)  # a session log begins with it
            for _ in range(20):  # warm-up
                log.append(event.kind, 1, payload, recorded_at)

        def batch(durability: str, path: str, n: int) -> float:
            log, journal = logs[durability, path], journals[durability, path]
            t0 = time.perf_counter()
            if path == "append":
                for _ in range(n):
                    log.append(event.kind, 1, payload, recorded_at)
                    log.sync()  # a no-op in flush mode
            else:  # the runner's path: codec, clock, append
                for _ in range(n):
                    journal.record("bench", event)
                    log.sync()
            return n / (time.perf_counter() - t0)

        rates: dict = {key: [] for key in logs}
        for _ in range(5):  # alternating batches; the median batch rate is reported
            for key in (("flush", "append"), ("flush", "record")):
                rates[key].append(batch(*key, n_flush // 5))
            rates["durable", "append"].append(batch("durable", "append", n_durable // 5))
        for log in logs.values():
            log.close()
        out["flush_append"] = statistics.median(rates["flush", "append"])
        out["flush_record"] = statistics.median(rates["flush", "record"])
        out["durable_append"] = statistics.median(rates["durable", "append"])
        out["n_flush"], out["n_durable"] = n_flush, n_durable
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# --- replay ---------------------------------------------------------------------------------------


def bench_replay(turns: int, repeats: int) -> dict:
    from effects.eventlog.codec import from_payload
    from effects.eventlog.store import read_envelopes, session_path
    from pipeline.agent import Agent
    from pipeline.shell.replay import replay
    from pipeline.tools import tool
    from stages.fold import fold

    @tool(read_only=True)
    def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: What to look up.
        """
        return text(len(query), 200)

    home = Path(tempfile.mkdtemp(prefix="mibyan-bench-replay-"))
    try:
        with bench_server() as srv:
            for i in range(turns):
                srv.script(Reply.tool_calls([("lookup", json.dumps({"query": f"q{i}"}))]),
                           Reply.text(text(i, 200)))
            with Agent(model=MODEL, base_url=srv.base_url, api_key=API_KEY, home=home,
                       durability="flush", stream=False, tools=[lookup]) as agent:
                t0 = time.perf_counter()
                for i in range(turns):
                    result = agent.run_conversation(text(i, 200))
                    assert result["completed"] and result["api_calls"] == 2
                live = time.perf_counter() - t0
                session_id = agent.session_id
        root = home / "sessions"
        times, report = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            report = replay(root, session_id)
            times.append(time.perf_counter() - t0)
        assert report is not None and report.identical, report.describe() if report else None
        fold_times = []
        path = session_path(root, session_id)
        for _ in range(repeats):
            t0 = time.perf_counter()
            state = fold(from_payload(e.kind, e.schema_version, e.payload)
                         for e in read_envelopes(path))
            fold_times.append(time.perf_counter() - t0)
        assert state.turns == turns
        return {"turns": turns, "events": report.events, "bytes": path.stat().st_size,
                "replay_s": statistics.median(times), "fold_s": statistics.median(fold_times),
                "live_s": live, "describe": report.describe()}
    finally:
        shutil.rmtree(home, ignore_errors=True)


# --- start-up -------------------------------------------------------------------------------------


def _wall(cmd: list[str], runs: int) -> float:
    times = []
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _importtime(module: str) -> float:
    """Cumulative import time (seconds) of ``module`` as ``python -X importtime`` reports it."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    for line in reversed(proc.stderr.splitlines()):
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1]) / 1e6
    raise RuntimeError(f"no importtime line for {module}")


def bench_startup(runs: int) -> dict:
    python = sys.executable
    mibyan = shutil.which("mibyan") or str(Path(python).parent / "mibyan")
    base = _wall([python, "-c", "pass"], runs)
    out = {"python -c pass": (base, None)}
    for module in ("pipeline", "pipeline.agent", "pipeline.cli.main", "openai"):
        _wall([python, "-c", f"import {module}"], 1)  # warm the page cache / bytecode
        wall = _wall([python, "-c", f"import {module}"], runs)
        cumulative = statistics.median(_importtime(module) for _ in range(runs))
        out[f"import {module}"] = (wall - base, cumulative)
    construct = ("from pipeline.agent import Agent; Agent(model='m', api_key='sk-x', "
                 "base_url='http://127.0.0.1:9/v1', home='/nonexistent-mibyan-home')")
    _wall([python, "-c", construct], 1)
    out["Agent(...) first use"] = (_wall([python, "-c", construct], runs) - base, None)
    _wall([mibyan, "--help"], 1)
    out["mibyan --help"] = (_wall([mibyan, "--help"], runs), None)
    return out


# --- orchestration and report ---------------------------------------------------------------------


def run_worker(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=WORKER_TIMEOUT + 30)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f}"


def mb(n: float) -> str:
    return f"{n / 2**20:7.1f} MB"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def configuration(turns: dict, variants: list[str]) -> None:
    import httpx2
    import openai
    http = f"httpx2 {httpx2.__version__}"
    print("mibyan benchmark")
    print("=" * 100)
    print(f"machine     : {platform.machine()} {platform.processor() or ''} "
          f"{os.cpu_count()} cpus, load average at start {os.getloadavg()[0]:.2f} "
          f"{os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"python      : {platform.python_implementation()} {platform.python_version()} "
          f"({sys.executable}), GIL switch interval {sys.getswitchinterval() * 1000:.1f} ms")
    print(f"libraries   : openai {openai.__version__}, {http}")
    fs = subprocess.run(["df", "-T", tempfile.gettempdir()], capture_output=True, text=True)
    fs_type = fs.stdout.splitlines()[-1].split()[1] if fs.returncode == 0 else "?"
    print(f"temp dir    : {tempfile.gettempdir()} ({fs_type}; event logs and fsyncs go here)")
    print("server      : tests.fake_openai.FakeOpenAIServer on loopback, zero added latency, "
          "keep-alive (request bodies not retained)")
    print(f"workload    : prior history of N alternating user/assistant messages of "
          f"{MESSAGE_CHARS} chars; every turn adds a {MESSAGE_CHARS}-char user message and the "
          f"server's {len(REPLY_TEXT)}-char reply")
    print(f"              streamed replies come in {STREAM_PIECE}-char chunks "
          f"({len(REPLY_TEXT) // STREAM_PIECE} content chunks + role, finish, usage)")
    print("overhead    : per turn, wall time of the turn minus the fake server's handler time; "
          "median over the measured turns")
    print("              variants run turn by turn in rotating order in one fresh process per "
          "history size, so machine noise hits all alike;")
    print("              the fake server runs in a process of its own (--in-process-server: a "
          "thread of the measuring process)")
    print("              history: a reset turn starts over from the N prior messages (mibyan: "
          "conversation_history=), the next turns")
    print("              continue the session (its own growing history); N=0: every turn is a "
          "one-shot conversation")
    for name in variants:
        print(f"              {name:15s} {VARIANTS[name][1]}")
    print("turns       : " + "; ".join(
        f"N={n}: {w} warm-up + {e} measured" if not k else
        f"N={n}: {w} warm-up + {e} x (reset + {k} measured)" for n, (w, e, k) in turns.items()))
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few turns; a smoke run")
    parser.add_argument("--no-stream", action="store_true", help="skip the streaming variants")
    parser.add_argument("--in-process-server", action="store_true",
                        help="run the fake server in a thread of the measuring process")
    parser.add_argument("--profile", type=int, metavar="N",
                        help="only profile mibyan's turn path at N prior messages")
    parser.add_argument("--floor-only", action="store_true",
                        help="section 1 only, mibyan against the bare httpx2 floor (no SDK loop)")
    parser.add_argument("--scale", type=int, default=1,
                        help="section 1: this many times the epochs (more turns per figure)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="history sizes for section 1, comma-separated (0, 200, 2000)")
    parser.add_argument("--window", type=int, metavar="TOKENS",
                        help="the model's window for mibyan (default: the unknown model's "
                             "128,000, which 2,000 messages outgrow: a turn handed them "
                             "compresses)")
    parser.add_argument("--worker", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.window:
        os.environ["MIBYAN_BENCH_WINDOW"] = str(args.window)

    if args.worker:
        import faulthandler
        what, *rest = args.worker
        if what != "server":  # a stuck worker prints where it is stuck, then exits
            faulthandler.dump_traceback_later(WORKER_TIMEOUT, exit=True)
        if what == "overhead":
            size, warmup, epochs, per_epoch = (int(x) for x in rest[:4])
            result = worker_overhead(size, schedule(size, warmup, epochs, per_epoch),
                                     rest[4].split(","), rest[5] == "1")
        elif what == "server":
            worker_server()
            return 0
        elif what == "memory":
            result = worker_memory(rest[0], rest[1], int(rest[2]), int(rest[3]), rest[4] == "1")
        else:
            raise SystemExit(f"unknown worker {what}")
        print(json.dumps(result))
        return 0
    if args.profile is not None:
        worker_profile(args.profile, 20 if args.profile >= 2000 else 100)
        return 0

    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    import faulthandler
    faulthandler.dump_traceback_later(900, exit=True)  # a safety net: never hang a CI box
    started = time.perf_counter()
    turns = QUICK_TURNS if args.quick else TURNS
    if args.floor_only:
        variants = ["floor", "mibyan/flush"] + ([] if args.no_stream
                                                 else ["floor/stream", "mibyan/stream"])
    else:
        variants = ["floor", "raw", "mibyan/flush", "mibyan/durable"]
        if not args.no_stream:
            variants += ["floor/stream", "raw/stream", "mibyan/stream"]
    configuration(turns, variants)

    # 1. per-turn overhead ---------------------------------------------------------------------
    print("1. Per-turn local overhead (ms; wall minus fake-server handler time)")
    print("-" * 100)
    header = (f"{'prior msgs':>10} {'variant':16} {'median':>8} {'p25':>8} {'p75':>8} "
              f"{'server':>8} {'x raw':>7} {'x floor':>7}  target")
    print(header)
    misses = []
    for size in (int(n) for n in args.sizes.split(",")):
        warmup, epochs, per_epoch = turns[size]
        epochs *= args.scale
        data = run_worker(["overhead", str(size), str(warmup), str(epochs), str(per_epoch),
                           ",".join(variants), "0" if args.in_process_server else "1"])
        med = {name: statistics.median(d["turn"]) for name, d in data.items()}
        for name in variants:
            values = data[name]["turn"]
            peer = "raw/stream" if name == "mibyan/stream" else "raw"
            ratio = (med[name] / med[peer] if name.startswith("mibyan") and peer in med
                     else None)
            bottom = "floor/stream" if name.endswith("stream") else "floor"
            floor = (f"{med[name] / med[bottom]:6.3f}x" if bottom in med and name != bottom
                     else "      -")
            target = ""
            if ratio is not None:
                goal = TARGETS[size]
                ok = ratio <= goal
                target = f"<= {goal:g}x  {'met' if ok else 'MISSED'}"
                if not ok and name in ("mibyan/flush", "mibyan/stream"):
                    misses.append((size, name, ratio, goal))
                if name == "mibyan/durable":
                    fsyncs = data[name]["fsync"]
                    target = (f"{(med[name] - med['mibyan/flush']) * 1000:+.3f} ms over flush; "
                              f"fsync itself {statistics.median(fsyncs) * 1000:.2f} ms median, "
                              f"{statistics.fmean(fsyncs) * 1000:.2f} mean")
            print(f"{size:>10} {name:16} {ms(med[name])} {ms(pct(values, 0.25))} "
                  f"{ms(pct(values, 0.75))} {ms(statistics.median(data[name]['server']))} "
                  f"{(f'{ratio:6.3f}x' if ratio is not None else '      -'):>7} {floor:>7}"
                  f"  {target}")
        # CPU time of this process (every thread) per turn: the server runs in another
        # process, so it is the loop's own work, steadier than wall time on a shared machine.
        cpu = {name: statistics.median(data[name]["cpu"]) for name in variants}
        for name in variants:
            bottom = "floor/stream" if name.endswith("stream") else "floor"
            values = data[name]["cpu"]
            floor = (f"{cpu[name] / cpu[bottom]:6.3f}x" if bottom in cpu and name != bottom
                     else "      -")
            print(f"{size:>10} {'cpu ' + name:16} {ms(cpu[name])} {ms(pct(values, 0.25))} "
                  f"{ms(pct(values, 0.75))} {'':>8} {'':>7} {floor:>7}  process CPU per turn")
        if size and data["mibyan/flush"]["reset"]:
            passed = statistics.median(data["mibyan/flush"]["reset"])
            base = med.get("raw", med.get("floor"))
            print(f"{size:>10} {'  history in':16} {ms(passed)} {'':>8} {'':>8} {'':>8} "
                  f"{passed / base:6.3f}x {'':>7}  mibyan/flush turn given conversation_history= "
                  f"of {size} msgs (n={len(data['mibyan/flush']['reset'])})")
            values = data["mibyan/flush"]["reset_cpu"]
            if "floor" in cpu:
                print(f"{size:>10} {'  cpu history in':16} {ms(statistics.median(values))} "
                      f"{ms(pct(values, 0.25))} {ms(pct(values, 0.75))} {'':>8} {'':>7} "
                      f"{statistics.median(values) / cpu['floor']:6.3f}x  process CPU of that "
                      "turn")
        print()
    print("Targets apply to mibyan in flush mode (the peers persist nothing); 'x raw' compares "
          "mibyan/stream with\nraw/stream and the others with raw. 'server' is the median "
          "handler time the overhead excludes.")
    print()

    if args.floor_only:
        print(f"total {time.perf_counter() - started:.0f} s; load average at end "
              f"{os.getloadavg()[0]:.2f}")
        return 0

    # 2. start-up ------------------------------------------------------------------------------
    print("2. Start-up (median of 5 fresh processes)")
    print("-" * 100)
    print(f"{'command':30} {'wall ms':>9} {'-X importtime cumulative ms':>28}")
    for name, (wall, cumulative) in bench_startup(5).items():
        extra = f"{cumulative * 1000:28.1f}" if cumulative is not None else f"{'':>28}"
        label = name if name in ("python -c pass", "mibyan --help") else name + " (- pass)"
        if name.startswith("Agent"):
            label = "import + Agent(...) (- pass)"
        print(f"{label:30} {wall * 1000:9.1f} {extra}")
    print("('- pass': minus the bare interpreter start-up; Agent(...) builds the OpenAI client, "
          "which imports the openai SDK)")
    print()

    # 3. memory --------------------------------------------------------------------------------
    mem_turns = 5 if args.quick else 30
    print(f"3. Peak memory: a session with 2,000 prior messages, {mem_turns} turns, "
          "in a process of its own (server in another process)")
    print("-" * 100)
    with bench_server() as srv:
        mib = run_worker(["memory", srv.base_url, "mibyan", "2000", str(mem_turns), "0"])
        mib_t = run_worker(["memory", srv.base_url, "mibyan", "2000", str(mem_turns), "1"])
        raw = run_worker(["memory", srv.base_url, "raw", "2000", "5", "0"])
    print(f"mibyan/flush   max RSS {mb(mib['rss_peak'])} (after imports {mb(mib['rss_imports'])},"
          f" growth {mb(mib['rss_peak'] - mib['rss_imports'])}); tracemalloc peak "
          f"{mb(mib_t['traced_peak'])}, live at end {mb(mib_t['traced_current'])}")
    print(f"raw SDK loop   max RSS {mb(raw['rss_peak'])} (after imports {mb(raw['rss_imports'])},"
          f" growth {mb(raw['rss_peak'] - raw['rss_imports'])}), 5 turns, for reference")
    print(f"(the history itself: {2000 + 2 * mem_turns} messages x ~{MESSAGE_CHARS} chars = "
          f"{mb((2000 + 2 * mem_turns) * MESSAGE_CHARS)} of text)")
    print()

    # 4. event log -----------------------------------------------------------------------------
    n_flush, n_durable = (2000, 50) if args.quick else (20000, 300)
    log = bench_eventlog(n_flush, n_durable)
    print(f"4. Event-log appends (ModelReplied payload {log['payload_bytes']} bytes, "
          f"line {log['line_bytes']} bytes)")
    print("-" * 100)
    print(f"SessionLog.append, flush mode             {log['flush_append']:10,.0f} /s   "
          f"({1e6 / log['flush_append']:.1f} us each, n={log['n_flush']})")
    print(f"LiveJournal.record (codec+clock+append)   {log['flush_record']:10,.0f} /s   "
          f"({1e6 / log['flush_record']:.1f} us each, n={log['n_flush']})")
    print(f"SessionLog.append + sync, durable mode    {log['durable_append']:10,.0f} /s   "
          f"({1e3 / log['durable_append']:.2f} ms each, n={log['n_durable']}; "
          "one fsync per append)")
    print()

    # 5. replay --------------------------------------------------------------------------------
    rep = bench_replay(40 if args.quick else 200, 3)
    print(f"5. Replay: a session of {rep['turns']} turns, each a tool call + its result + a text "
          f"answer ({rep['events']} events, {rep['bytes'] / 1024:.0f} KiB log)")
    print("-" * 100)
    print(f"pipeline.shell.replay.replay        {rep['events'] / rep['replay_s']:10,.0f} events/s   "
          f"({rep['replay_s'] * 1000:.1f} ms, median of 3; {rep['describe']})")
    print(f"read_envelopes + decode + fold {rep['events'] / rep['fold_s']:9,.0f} events/s   "
          f"({rep['fold_s'] * 1000:.1f} ms; what opening/resuming a session costs)")
    print(f"(recording it live took {rep['live_s'] * 1000:.0f} ms for {2 * rep['turns']} model "
          f"calls and {rep['turns']} tool runs)")
    print()

    print("=" * 100)
    if misses:
        print("targets missed: " + "; ".join(f"{n} msgs {name} {r:.3f}x > {g:g}x"
                                             for n, name, r, g in misses))
        print("run `uv run python bench/bench.py --profile N` to see where mibyan's turn spends it")
    else:
        print("all overhead targets met")
    print(f"total {time.perf_counter() - started:.0f} s; load average at end "
          f"{os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
