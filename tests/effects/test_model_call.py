"""Where a model call runs and how an interrupt stops it (``effects.model_call``): a shipped
adapter's call on the caller's own thread, stopped by the agent's ``Interrupt`` from another
thread, from a signal handler on that thread, or while it is still connecting; any other
client's call on a worker that an interrupt leaves behind."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from effects.clock import SystemClock
from effects.model_call import call_model
from effects.protocols import Interrupt
from effects.providers.openai_chat import OpenAIChatClient
from stages.decision import ModelRequest
from stages.log.events import Interrupted, ModelFailed, ModelReplied, Usage
from stages.log.messages import Message
from tests.fake_openai import FakeOpenAIServer, Reply

# Far longer than any interrupt here may take to be seen: a call still running at the end of
# it was not stopped.
HANG = 20.0
PROMPT = 10.0


def request(**kw) -> ModelRequest:
    return ModelRequest(model="m", provider="fake", api_mode="chat_completions",
                        purpose="step", system_prompt=None,
                        messages=(Message(role="user", content="hi"),), stream=False, **kw)


class Spied(OpenAIChatClient):
    """The shipped adapter, noting the thread each call runs on."""

    threads: list[str]

    def complete(self, *args, **kw):  # type: ignore[no-untyped-def]
        self.threads.append(threading.current_thread().name)
        return super().complete(*args, **kw)


def adapter(base_url: str) -> Spied:
    client = Spied(base_url=base_url, api_key="k", provider="fake", timeout=HANG * 3)
    client.threads = []
    return client


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def in_flight(server: FakeOpenAIServer) -> None:
    deadline = time.monotonic() + PROMPT
    while server.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)


def test_a_shipped_adapter_s_call_runs_on_the_caller_s_thread(server) -> None:
    server.script(Reply.text("hello"))
    client = adapter(server.base_url)
    event = call_model(client, request(), clock=SystemClock(), interrupt=Interrupt())
    assert isinstance(event, ModelReplied) and event.message.content == "hello"
    assert client.threads == [threading.current_thread().name]


def test_a_call_that_asks_for_tokens_runs_on_a_worker(server) -> None:
    # The server's /tokenize is asked after the call, and no cancel reaches that post.
    server.script(Reply.text("hello"))
    client = adapter(server.base_url)
    call_model(client, request(logprobs=True), clock=SystemClock(), interrupt=Interrupt())
    assert client.threads[0] != threading.current_thread().name


def test_an_interrupt_from_another_thread_stops_the_call_on_this_one(server) -> None:
    server.script(Reply.hang(HANG))
    interrupt = Interrupt()

    def later() -> None:
        in_flight(server)
        interrupt.set()

    threading.Thread(target=later, daemon=True).start()
    started = time.monotonic()
    event = call_model(adapter(server.base_url), request(), clock=SystemClock(),
                       interrupt=interrupt)
    assert event == Interrupted(during="model_call")
    assert time.monotonic() - started < PROMPT
    assert not interrupt.is_set()  # taken by this call: it does not stop the next step


def test_a_signal_handler_s_interrupt_stops_the_call_on_its_own_thread(server) -> None:
    # As the CLI's Ctrl-C handler does: the handler runs on the very thread the call blocks.
    assert threading.current_thread() is threading.main_thread()
    server.script(Reply.hang(HANG))
    interrupt = Interrupt()
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: interrupt.set())
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        started = time.monotonic()
        event = call_model(adapter(server.base_url), request(), clock=SystemClock(),
                           interrupt=interrupt)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert event == Interrupted(during="model_call")
    assert time.monotonic() - started < PROMPT


def test_an_interrupt_before_the_call_stops_it_before_anything_is_sent(server) -> None:
    interrupt = Interrupt()
    interrupt.set()
    event = call_model(adapter(server.base_url), request(), clock=SystemClock(),
                       interrupt=interrupt)
    assert event == Interrupted(during="model_call")
    assert server.requests == []


@pytest.fixture
def unanswered_port() -> Iterator[int]:
    """A port whose listener's queue is full: a connect to it waits for good."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port))
    try:
        yield port
    finally:
        filler.close()
        listener.close()


def test_an_interrupt_while_the_call_connects_stops_it(unanswered_port) -> None:
    interrupt = Interrupt()
    threading.Timer(0.3, interrupt.set).start()
    started = time.monotonic()
    event = call_model(adapter(f"http://127.0.0.1:{unanswered_port}/v1"), request(),
                       clock=SystemClock(), interrupt=interrupt)
    assert event == Interrupted(during="model_call")
    assert time.monotonic() - started < PROMPT


class Stubborn:
    """A client that does not say it stops on a cancel, and does not."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.thread = ""

    def complete(self, request, *, on_delta=None, cancel=None):  # type: ignore[no-untyped-def]
        self.thread = threading.current_thread().name
        self.release.wait(HANG)
        return ModelReplied(message=Message(role="assistant", content="late"),
                            finish_reason="stop", usage=Usage(), model="m", latency_ms=1.0)


def test_a_client_that_cannot_be_stopped_is_left_behind_on_a_worker() -> None:
    client = Stubborn()
    interrupt = Interrupt()
    threading.Timer(0.3, interrupt.set).start()
    started = time.monotonic()
    try:
        event = call_model(client, request(), clock=SystemClock(), interrupt=interrupt)
    finally:
        client.release.set()
    assert event == Interrupted(during="model_call")
    assert time.monotonic() - started < PROMPT
    assert client.thread not in ("", threading.current_thread().name)


def test_a_failure_that_is_not_an_interrupt_stays_a_failure(server) -> None:
    server.script(Reply.error(500, "boom"))
    event = call_model(adapter(server.base_url), request(), clock=SystemClock(),
                       interrupt=Interrupt())
    assert isinstance(event, ModelFailed) and event.status == 500
