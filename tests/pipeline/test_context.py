"""Context management end to end (rules 3): a session against the fake OpenAI server driven
past its window's threshold again and again (the summariser answers from the same server)
keeps going, continues in child sessions, resumes from any of them, and replays identically;
an overflow compresses and retries once; the provider's window is probed and recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.lineage import newest, oldest
from effects.eventlog.store import read_envelopes, session_path
from effects.providers.window_probe import probe_context_window
from pipeline.agent import Agent
from pipeline.memory_providers import MemoryProvider
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock
from stages.context.summary import SUMMARY_PREFIX
from stages.log import events as ev
from stages.log.alternation import violations
from tests.fake_openai import FakeOpenAIServer, Reply


class SummarisingServer(FakeOpenAIServer):
    """The fake server; a summary request (the compressor's prompt) gets a summary that
    carries every Done item it was given, others get the scripted replies."""

    def __init__(self) -> None:
        super().__init__()
        self.summaries = 0
        self.fail_summaries = False

    def _record(self, body: dict[str, Any] | None, headers: dict[str, str]) -> Any:
        text = json.dumps(body or {})
        if "NEW TURNS TO INCORPORATE" in text or "CONVERSATION:" in text:
            with self._lock:
                self._requests.append(body)
                self._headers.append(headers)
                self.summaries += 1
                n = self.summaries
            if self.fail_summaries:
                return Reply.error(503, "overloaded", type="server_error")
            return Reply.text(f"## Goal\nchat\n## Done\n- summary {n} written\n"
                              f"## Facts\n- the code is 4711\n## Open Questions\n- none\n")
        return super()._record(body, headers)


@pytest.fixture
def summarising() -> Iterator[SummarisingServer]:
    with SummarisingServer() as srv:
        yield srv
        srv.assert_done()


def _events(home, sid: str) -> list[ev.Event]:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", sid))]


def _agent(server, home, ids: CountingIds, **kw: Any) -> Agent:
    kw.setdefault("context_length", 2048)
    return Agent(model="fake-model", base_url=server.base_url, api_key="sk-test", home=home,
                 clock=FakeClock(), ids=ids, stream=False, max_retries=0, **kw)


def _turn(server, agent: Agent, n: int) -> dict:
    server.script(Reply.text(f"answer {n} " + "z" * 600))
    return agent.run_conversation(f"question {n} " + "q" * 500)


def test_a_long_session_compresses_again_and_again_and_goes_on(summarising, home) -> None:
    ids = CountingIds()
    seen: list[str] = []
    with _agent(summarising, home, ids) as agent:
        for n in range(12):
            result = _turn(summarising, agent, n)
            assert result["completed"], result
            assert result["final_response"].startswith(f"answer {n}")
            seen.append(agent.session_id)
    chain = list(dict.fromkeys(seen))
    assert summarising.summaries >= 3 and len(chain) >= 3
    root = home / "sessions"
    for sid in chain:
        assert replay(root, sid).identical, (sid, replay(root, sid).describe())
    # Each child names its parent and carries the compressed history; the parent's log ends
    # with where the session went.
    for parent, child in zip(chain, chain[1:], strict=False):
        started, inherited = _events(home, child)[:2]
        assert isinstance(started, ev.SessionStarted) and started.parent_session_id == parent
        assert isinstance(inherited, ev.ContextInherited) and inherited.reason == "compression"
        assert violations(inherited.messages) == []
        assert any(SUMMARY_PREFIX in (m.content or "") for m in inherited.messages)
        assert isinstance(_events(home, parent)[-1], ev.SessionSplit)
        assert _events(home, parent)[-1].child_session_id == child
    # Every request sent stayed inside the window (chars/4 under 2,048 tokens).
    assert all(len(json.dumps(r["messages"])) // 4 < 2048 for r in summarising.requests)
    # The iterative summary keeps the first Done item through every update.
    last = [e for e in _events(home, chain[-1]) if isinstance(e, ev.ContextInherited)][0]
    assert "summary 1 written" in (last.summary or "")


def test_resuming_any_session_of_the_chain_opens_the_newest(summarising, home) -> None:
    ids = CountingIds()
    with _agent(summarising, home, ids) as agent:
        first = _turn(summarising, agent, 0)["session_id"]
        for n in range(1, 8):
            _turn(summarising, agent, n)
        last = agent.session_id
    root = home / "sessions"
    assert first is not None and last is not None and last != first
    assert newest(root, first) == last
    assert oldest(root, last) == first == oldest(root, first)
    with _agent(summarising, home, ids, session_id=first) as again:
        result = _turn(summarising, again, 99)
        assert result["completed"] and result["session_id"] == last
        # The resumed session remembers what the summaries kept.
        assert "4711" in json.dumps(summarising.requests[-1])
    assert replay(root, last).identical


def test_a_failing_summary_drops_the_middle_with_a_marker_and_cools_down(
        summarising, home) -> None:
    summarising.fail_summaries = True
    ids = CountingIds()
    with _agent(summarising, home, ids) as agent:
        for n in range(6):
            assert _turn(summarising, agent, n)["completed"]
    # One summary call failed; the 600 s cooldown (a fake clock that does not move) kept the
    # later compressions from asking again: they dropped the middle with a marker.
    assert summarising.summaries == 1
    events = [e for sid in sorted(p.stem for p in (home / "sessions").glob("*.jsonl"))
              for e in _events(home, sid)]
    failed = [e for e in events if isinstance(e, ev.SummaryFailed)]
    compressed = [e for e in events if isinstance(e, ev.ContextCompressed)]
    assert len(failed) == 1 and len(compressed) >= 2
    assert all("dropped to fit the context window" in (c.inserted or "") for c in compressed)
    assert compressed[0].cooldown_until is not None


def test_an_overflow_compresses_and_retries_the_call_once(summarising, home) -> None:
    ids = CountingIds()
    overflow = Reply.error(
        400, "This model's maximum context length is 2048 tokens. However, your messages "
        "resulted in 2300 tokens.", code="context_length_exceeded")
    with _agent(summarising, home, ids, context_length=100_000) as agent:
        for n in range(4):
            _turn(summarising, agent, n)
        summarising.script(overflow, Reply.text("fits now"))
        result = agent.run_conversation("and now?")
        sid = result["session_id"]
        assert agent.session_id != sid  # the compressed session goes on in a child
    assert result["completed"] and result["final_response"] == "fits now"
    events = _events(home, sid)
    [decided] = [e for e in events if isinstance(e, ev.RecoveryDecided)]
    assert decided.action == "compress" and decided.reason == "context_overflow"
    assert [e.reason for e in events if isinstance(e, ev.CompressionPlanned)] == ["overflow"]
    assert replay(home / "sessions", sid).identical


def test_a_second_overflow_of_the_same_call_fails_the_turn(summarising, home) -> None:
    ids = CountingIds()
    overflow = Reply.error(400, "prompt is too long", code="context_length_exceeded")
    with _agent(summarising, home, ids, context_length=100_000) as agent:
        for n in range(4):
            _turn(summarising, agent, n)
        summarising.script(overflow, overflow)
        result = agent.run_conversation("and now?")
    assert result["failed"] and "context" in result["error"].lower()


# --- the window probe ------------------------------------------------------------------------

class _Props(BaseHTTPRequestHandler):
    answers: dict[str, Any] = {}

    def do_GET(self) -> None:  # noqa: N802
        body = self.answers.get(self.path)
        payload = json.dumps(body).encode() if body is not None else b"{}"
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        del args


@pytest.fixture
def props_server() -> Iterator[tuple[str, dict[str, Any]]]:
    answers: dict[str, Any] = {}
    handler = type("Handler", (_Props,), {"answers": answers})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", answers
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_probe_reads_llama_cpp_props_then_the_models_listing(props_server) -> None:
    base_url, answers = props_server
    assert probe_context_window(base_url, "m") is None
    answers["/v1/models"] = {"data": [{"id": "m", "max_model_len": 32_768}, {"id": "other"}]}
    assert probe_context_window(base_url, "m") == (32_768, "provider:/models")
    answers["/props"] = {"default_generation_settings": {"n_ctx": 2048}}
    assert probe_context_window(base_url, "m") == (2048, "provider:/props")


def test_the_probed_window_is_recorded_with_its_source_and_used(props_server, tmp_path) -> None:
    from effects.providers.window_probe import window_probe
    from pipeline.testing import ScriptedModel
    base_url, answers = props_server
    answers["/props"] = {"default_generation_settings": {"n_ctx": 4096}}
    probe = window_probe(None)
    agent = Agent(client=ScriptedModel("hi"), home=tmp_path, clock=FakeClock(),
                  ids=CountingIds(), base_url=base_url, provider="selfhosted")
    agent._effects.window_probe = probe
    with agent:
        agent.run_conversation("hello")
        sid = agent.session_id
    [probed] = [e for e in _events(tmp_path, sid) if isinstance(e, ev.ContextWindowProbed)]
    assert probed.tokens == 4096 and probed.source == "provider:/props"
    assert replay(tmp_path / "sessions", sid).identical



def test_a_self_hosted_server_behind_the_default_provider_is_asked(tmp_path) -> None:
    """The provider is called "openai" (the default) but the base URL is a llama.cpp server:
    its window is asked, not assumed from the table."""
    from tests.fake_openai import FakeOpenAIServer, Reply

    def do_get(handler: Any) -> None:
        props = {"default_generation_settings": {"n_ctx": 3072}}
        if handler.path == "/props":
            handler._send(200, "application/json", json.dumps(props).encode(), [])
        else:
            handler._not_found(handler.server.fake)

    class LlamaServer(FakeOpenAIServer):
        handler = type("Handler", (FakeOpenAIServer.handler,), {"do_GET": do_get})

    with LlamaServer(default=Reply.text("hi")) as server:
        agent = Agent(model="m", base_url=server.base_url, api_key="k", home=tmp_path,
                      clock=FakeClock(), ids=CountingIds())
        with agent:
            agent.run_conversation("hello")
            sid = agent.session_id
    [probed] = [e for e in _events(tmp_path, sid) if isinstance(e, ev.ContextWindowProbed)]
    assert (probed.provider, probed.tokens, probed.source) == ("openai", 3072, "provider:/props")


def test_the_hosted_apis_are_not_asked() -> None:
    from effects.providers.window_probe import self_hosted
    assert not self_hosted("https://api.openai.com/v1")
    assert not self_hosted("https://api.anthropic.com")
    assert not self_hosted("https://openrouter.ai/api/v1")
    assert self_hosted("http://127.0.0.1:8080/v1") and self_hosted("https://vllm.corp.example/v1")

def test_mibyan_sessions_shows_the_lineage(summarising, home, capsys) -> None:
    from pipeline.cli.main import main
    ids = CountingIds()
    with _agent(summarising, home, ids) as agent:
        first = _turn(summarising, agent, 0)["session_id"]
        for n in range(1, 6):
            _turn(summarising, agent, n)
        last = agent.session_id
    assert main(["--home", str(home), "sessions"]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    assert "parent" in header and "continued_in" in header
    by_id = {row.split()[0]: row for row in rows if row.startswith("session_")}
    assert first in by_id and last in by_id and last != first
    # The row names its continuation (then the log's signature state, the last column).
    assert by_id[first].split()[-2:] == [newest_child(home, first), "signed"]


def newest_child(home, sid: str) -> str:
    return next(e.child_session_id for e in _events(home, sid) if isinstance(e, ev.SessionSplit))


@pytest.mark.parametrize(("given", "named"), [
    ({"preflight_threshold": 1.5}, "preflight_threshold"),
    ({"between_turns_threshold": 0}, "between_turns_threshold"),
    ({"compression": "yes"}, "compression"),
    ({"protect_last_n": 0}, "protect_last_n"),
    ({"summary_model": ""}, "summary_model"),
])
def test_a_bad_context_setting_is_a_usage_error_naming_it(given, named, tmp_path) -> None:
    from pipeline.testing import ScriptedModel
    from stages.errors import UsageError
    with pytest.raises(UsageError, match=named):
        Agent(client=ScriptedModel(), home=tmp_path, **given)


def test_context_settings_come_from_config_toml(tmp_path) -> None:
    from pipeline.testing import ScriptedModel
    (tmp_path / "config.toml").write_text(
        "[context]\ncontext_length = 4096\npreflight_threshold = 0.6\ncompression = false\n"
        'summary_model = "small-model"\n')
    agent = Agent(client=ScriptedModel(), home=tmp_path)
    s = agent.settings
    assert (s.context_length, s.preflight_threshold, s.compression_enabled, s.summary_model) \
        == (4096, 0.6, False, "small-model")


def test_a_fallback_s_window_comes_from_config(tmp_path) -> None:
    from pipeline.testing import ScriptedModel
    from stages.errors import UsageError
    agent = Agent(client=ScriptedModel(), home=tmp_path, fallback_providers=[
        {"provider": "openai", "model": "tiny", "context_length": 4096}])
    assert agent.settings.fallback_providers[0].context_length == 4096
    with pytest.raises(UsageError, match="context_length"):
        Agent(client=ScriptedModel(), home=tmp_path, fallback_providers=[
            {"provider": "openai", "model": "tiny", "context_length": "big"}])


class Keeper(MemoryProvider):
    """A provider that asks compression to keep what the conversation must not lose."""

    name = "keeper"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_pre_compress(self, messages) -> str:
        self.seen.append(len(messages))
        return "Kept by memory: the code is 4711."


def test_memory_providers_see_the_conversation_before_it_is_compressed(summarising, home) -> None:
    keeper = Keeper()
    ids = CountingIds()
    with _agent(summarising, home, ids, memory_provider=keeper) as agent:
        for n in range(4):
            assert _turn(summarising, agent, n)["completed"]
    assert keeper.seen and all(count > 2 for count in keeper.seen)
    chain = sorted(p.stem for p in (home / "sessions").glob("*.jsonl"))
    summaries = [e for sid in chain for e in _events(home, sid)
                 if isinstance(e, ev.ContextSummarised)]
    assert summaries and all(s.text.endswith("Kept by memory: the code is 4711.")
                             for s in summaries)
    for sid in chain:
        assert replay(home / "sessions", sid).identical, sid
