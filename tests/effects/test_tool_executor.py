"""Tests for effects.tools.executor: the thread-pool runner and the strict scripted double."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effects.tools.executor import (
    INTERRUPTED_ERROR,
    MAX_TOOL_WORKERS,
    ScriptedToolRunner,
    ScriptedToolStep,
    ThreadPoolToolRunner,
    ToolRunner,
    render_result,
)
from stages.log.messages import canonical_json
from stages.log.tool_specs import ToolInvocation, ToolOutcome

TIMEOUT = 2.0


class FnTool:
    """The smallest thing the runner can invoke: keyword arguments from JSON, task_id optional."""

    def __init__(self, fn: Callable[..., object], *, wants_task_id: bool = False) -> None:
        self.fn = fn
        self.wants_task_id = wants_task_id

    def invoke(self, arguments: str, *, task_id: str) -> object:
        kwargs = json.loads(arguments or "{}")
        if self.wants_task_id:
            kwargs["task_id"] = task_id
        return self.fn(**kwargs)


def registry(**fns: Callable[..., object]) -> dict[str, FnTool]:
    return {name: FnTool(fn) for name, fn in fns.items()}


def calls(name: str, n: int) -> list[ToolInvocation]:
    return [ToolInvocation(call_id=f"c{i}", name=name, arguments=canonical_json({"i": i}))
            for i in range(n)]


@pytest.fixture
def make_runner():
    made: list[ThreadPoolToolRunner] = []

    def make(reg, **kwargs) -> ThreadPoolToolRunner:
        made.append(ThreadPoolToolRunner(reg, **kwargs))
        return made[-1]

    yield make
    for runner in made:
        runner.shutdown()


# --- where calls run ---------------------------------------------------------------------------


def test_single_call_runs_in_the_calling_thread_even_when_concurrent(make_runner) -> None:
    runner = make_runner(registry(where=lambda i: threading.get_ident()))
    (outcome,) = runner.run(calls("where", 1), concurrent=True, task_id="t")
    assert outcome.ok and outcome.content == str(threading.get_ident())
    assert runner._pool is None  # no pool for a single call


def test_sequential_runs_in_order_in_the_calling_thread(make_runner) -> None:
    order: list[int] = []

    def record(i: int) -> int:
        order.append(i)
        return threading.get_ident()

    runner = make_runner(registry(record=record))
    outcomes = runner.run(calls("record", 5), concurrent=False, task_id="t")
    assert order == [0, 1, 2, 3, 4]
    assert {o.content for o in outcomes} == {str(threading.get_ident())}
    assert [o.call_id for o in outcomes] == ["c0", "c1", "c2", "c3", "c4"]
    assert runner._pool is None


def test_concurrent_calls_really_overlap(make_runner) -> None:
    barrier = threading.Barrier(4, timeout=TIMEOUT)  # would break if the calls ran one by one
    runner = make_runner(registry(meet=lambda i: barrier.wait() >= 0))
    outcomes = runner.run(calls("meet", 4), concurrent=True, task_id="t")
    assert [o.ok for o in outcomes] == [True] * 4, [o.error for o in outcomes]


def test_order_kept_when_finishing_in_reverse(make_runner) -> None:
    n = 6
    done = [threading.Event() for _ in range(n)]
    finished: list[int] = []

    def step(i: int) -> str:
        if i < n - 1:  # each waits for the one after it: finish order n-1, ..., 0
            assert done[i + 1].wait(TIMEOUT)
        finished.append(i)
        done[i].set()
        return f"r{i}"

    runner = make_runner(registry(step=step))
    outcomes = runner.run(calls("step", n), concurrent=True, task_id="t")
    assert finished == list(reversed(range(n)))
    assert [o.call_id for o in outcomes] == [f"c{i}" for i in range(n)]
    assert [o.content for o in outcomes] == [f"r{i}" for i in range(n)]


@settings(max_examples=25, deadline=None)
@given(st.integers(2, MAX_TOOL_WORKERS).flatmap(lambda n: st.permutations(range(n))))
def test_any_finish_order_keeps_call_order(finish_order: list[int]) -> None:
    n = len(finish_order)
    rank = {call: position for position, call in enumerate(finish_order)}
    done = [threading.Event() for _ in range(n)]
    finished: list[int] = []

    def step(i: int) -> int:
        if rank[i] > 0:
            assert done[finish_order[rank[i] - 1]].wait(TIMEOUT)
        finished.append(i)
        done[i].set()
        return i

    with ThreadPoolToolRunner(registry(step=step)) as runner:
        outcomes = runner.run(calls("step", n), concurrent=True, task_id="t")
    assert finished == list(finish_order)
    assert [o.content for o in outcomes] == [str(i) for i in range(n)]


def test_at_most_eight_workers(make_runner) -> None:
    lock = threading.Condition()
    state = {"active": 0, "peak": 0}
    threads: set[int] = set()

    def busy(i: int) -> None:
        with lock:
            threads.add(threading.get_ident())
            state["active"] += 1
            state["peak"] = max(state["peak"], state["active"])
            lock.notify_all()
            lock.wait_for(lambda: state["peak"] >= MAX_TOOL_WORKERS, timeout=TIMEOUT)
        time.sleep(0.01)  # give any extra worker a chance to show up
        with lock:
            state["active"] -= 1

    runner = make_runner(registry(busy=busy))
    outcomes = runner.run(calls("busy", 12), concurrent=True, task_id="t")
    assert all(o.ok for o in outcomes)
    assert state["peak"] == MAX_TOOL_WORKERS
    assert len(threads) <= MAX_TOOL_WORKERS
    assert threading.get_ident() not in threads


def test_pool_is_created_lazily_reused_and_recreated_after_shutdown(make_runner) -> None:
    barrier = threading.Barrier(3, timeout=TIMEOUT)
    runner = make_runner(registry(who=lambda i: (barrier.wait(), threading.get_ident())[1]))
    assert runner._pool is None
    first = {o.content for o in runner.run(calls("who", 3), concurrent=True, task_id="t")}
    pool = runner._pool
    second = {o.content for o in runner.run(calls("who", 3), concurrent=True, task_id="t")}
    assert runner._pool is pool and second <= first
    runner.shutdown()
    assert runner._pool is None
    outcomes = runner.run(calls("who", 3), concurrent=True, task_id="t")
    assert all(o.ok for o in outcomes)


def test_workers_see_the_callers_context_and_task_id(make_runner) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("from-caller")
    reg = {"ctx": FnTool(lambda i, task_id: f"{var.get()}/{task_id}", wants_task_id=True)}
    outcomes = make_runner(reg).run(calls("ctx", 3), concurrent=True, task_id="t-9")
    assert [o.content for o in outcomes] == ["from-caller/t-9"] * 3


# --- outcomes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("result", "content"), [
    ("text", "text"),
    (None, ""),
    ({"b": 1, "a": [1, 2]}, '{"a":[1,2],"b":1}'),
    (42, "42"),
    ({3}, "{3}"),  # a set is not JSON: str() fallback
])
def test_results_are_rendered(make_runner, result: object, content: str) -> None:
    (outcome,) = make_runner(registry(r=lambda i: result)).run(
        calls("r", 1), concurrent=False, task_id="t")
    assert outcome == ToolOutcome(call_id="c0", name="r", content=content, ok=True,
                                  duration_ms=outcome.duration_ms)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10)


@given(json_values)
def test_render_result_is_canonical_json_for_non_strings(value: object) -> None:
    rendered = render_result(value)
    if isinstance(value, str):
        assert rendered == value
    elif value is None:
        assert rendered == ""
    else:
        assert rendered == canonical_json(value) and json.loads(rendered) == value


def test_a_raising_tool_becomes_an_error_outcome(make_runner) -> None:
    def boom(i: int) -> None:
        if i == 1:
            raise ValueError("bad things")
        if i == 2:
            raise RuntimeError()

    for concurrent in (False, True):
        outcomes = make_runner(registry(boom=boom)).run(
            calls("boom", 3), concurrent=concurrent, task_id="t")
        assert [o.ok for o in outcomes] == [True, False, False]
        assert outcomes[1].error == "ValueError: bad things"
        assert outcomes[1].content == '{"error":"ValueError: bad things"}'
        assert outcomes[2].error == "RuntimeError"


def test_unknown_tool_is_an_error_outcome(make_runner) -> None:
    (outcome,) = make_runner({}).run(calls("ghost", 1), concurrent=False, task_id="t")
    assert not outcome.ok and outcome.error == "unknown tool: ghost"
    assert json.loads(outcome.content) == {"error": "unknown tool: ghost"}


def test_duration_is_measured(make_runner) -> None:
    (outcome,) = make_runner(registry(nap=lambda i: time.sleep(0.02))).run(
        calls("nap", 1), concurrent=False, task_id="t")
    assert 15 <= outcome.duration_ms < 1000


# --- interrupt ---------------------------------------------------------------------------------


def skipped(outcome: ToolOutcome) -> bool:
    return (not outcome.ok and outcome.error == INTERRUPTED_ERROR
            and json.loads(outcome.content) == {"error": INTERRUPTED_ERROR})


def test_interrupt_skips_the_remaining_sequential_calls(make_runner) -> None:
    interrupt = threading.Event()
    ran: list[int] = []

    def work(i: int) -> None:
        ran.append(i)
        if i == 1:
            interrupt.set()

    outcomes = make_runner(registry(work=work), interrupt=interrupt).run(
        calls("work", 4), concurrent=False, task_id="t")
    assert ran == [0, 1]
    assert [o.ok for o in outcomes[:2]] == [True, True]
    assert all(skipped(o) for o in outcomes[2:])


def test_interrupt_before_a_concurrent_batch_skips_all(make_runner) -> None:
    interrupt = threading.Event()
    interrupt.set()
    ran: list[int] = []
    outcomes = make_runner(registry(work=ran.append), interrupt=interrupt).run(
        calls("work", 3), concurrent=True, task_id="t")
    assert ran == [] and all(skipped(o) for o in outcomes)


def test_interrupt_skips_concurrent_calls_not_yet_started(make_runner) -> None:
    interrupt = threading.Event()
    # The first 8 calls fill the pool; the barrier's action raises the interrupt before any of
    # them finishes, so the 9th call (queued for a free worker) must be skipped.
    barrier = threading.Barrier(MAX_TOOL_WORKERS, action=interrupt.set, timeout=TIMEOUT)
    runner = make_runner(registry(hold=lambda i: barrier.wait()), interrupt=interrupt)
    outcomes = runner.run(calls("hold", MAX_TOOL_WORKERS + 1), concurrent=True, task_id="t")
    assert all(o.ok for o in outcomes[:MAX_TOOL_WORKERS])
    assert skipped(outcomes[-1])


# --- scripted runner ---------------------------------------------------------------------------


def invocation(name: str, arguments: str, call_id: str = "c") -> ToolInvocation:
    return ToolInvocation(call_id=call_id, name=name, arguments=arguments)


def test_scripted_runner_serves_steps_in_order() -> None:
    runner = ScriptedToolRunner([
        ("read", '{"path": "/a"}', "contents"),
        ScriptedToolStep(name="write", arguments=None, content="denied", ok=False),
    ])
    outcomes = runner.run([invocation("read", '{"path":"/a"}', "c1"),
                           invocation("write", '{"anything":1}', "c2")],
                          concurrent=True, task_id="t")
    assert outcomes == (
        ToolOutcome(call_id="c1", name="read", content="contents", ok=True),
        ToolOutcome(call_id="c2", name="write", content="denied", ok=False, error="denied"),
    )
    runner.assert_complete()
    assert [c.call_id for c in runner.calls] == ["c1", "c2"]
    assert runner.batches[0][1:] == (True, "t")


@pytest.mark.parametrize("call", [
    invocation("write", '{"path":"/a"}'),     # wrong name
    invocation("read", '{"path":"/b"}'),      # wrong arguments
])
def test_scripted_runner_fails_on_an_unexpected_call(call: ToolInvocation) -> None:
    runner = ScriptedToolRunner([("read", '{"path":"/a"}', "x")])
    with pytest.raises(AssertionError, match="unexpected tool call #1"):
        runner.run([call], concurrent=False, task_id="t")
    with pytest.raises(AssertionError, match="unexpected"):  # even if the first was swallowed
        runner.assert_complete()


def test_scripted_runner_fails_past_the_script_and_on_unused_steps() -> None:
    runner = ScriptedToolRunner([("a", None, "1"), ("b", None, "2")])
    runner.run([invocation("a", "{}")], concurrent=False, task_id="t")
    with pytest.raises(AssertionError, match="1 scripted tool step.*not used: b"):
        runner.assert_complete()
    runner.run([invocation("b", "{}")], concurrent=False, task_id="t")
    runner.assert_complete()
    with pytest.raises(AssertionError, match="all 2 scripted steps are used"):
        runner.run([invocation("c", "{}")], concurrent=False, task_id="t")


def test_both_runners_fit_the_protocol() -> None:
    runners: list[ToolRunner] = [ThreadPoolToolRunner({}), ScriptedToolRunner([])]
    for runner in runners:
        assert runner.run([], concurrent=True, task_id="t") == ()
