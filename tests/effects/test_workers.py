"""The reusable worker threads that model calls run on."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from effects import workers


def _on_thread(seen: list[threading.Thread], release: threading.Event | None = None):
    def fn() -> None:
        seen.append(threading.current_thread())
        if release is not None:
            release.wait(10)
    return fn


def test_a_finished_worker_takes_the_next_call() -> None:
    seen: list[threading.Thread] = []
    for _ in range(3):
        assert workers.submit(_on_thread(seen)).wait(10)
    assert seen[0] is seen[1] is seen[2]
    assert seen[0] is not threading.current_thread()


def test_a_busy_worker_is_not_given_another_call() -> None:
    seen: list[threading.Thread] = []
    release = threading.Event()
    abandoned = workers.submit(_on_thread(seen, release))
    assert not abandoned.wait(0)
    assert workers.submit(_on_thread(seen)).wait(10)
    release.set()
    assert abandoned.wait(10)
    assert seen[0] is not seen[1]


def test_an_idle_worker_leaves_after_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "IDLE_SECONDS", 0.01)
    monkeypatch.setattr(workers, "_idle", [])
    seen: list[threading.Thread] = []
    assert workers.submit(_on_thread(seen)).wait(10)
    seen[0].join(10)
    assert not seen[0].is_alive()
    assert workers._idle == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_call_that_raises_ends_its_worker_which_is_not_reused() -> None:
    ended: list[threading.Thread] = []

    def boom() -> None:
        ended.append(threading.current_thread())
        raise RuntimeError("the worker's last call")

    failed = workers.submit(boom)
    assert failed.wait(10)
    ended[0].join(10)  # its exception is reported here, inside this test
    assert not ended[0].is_alive()
    seen: list[threading.Thread] = []
    assert workers.submit(_on_thread(seen)).wait(10)
    assert seen[0].is_alive()


def test_an_idle_worker_keeps_nothing_of_its_last_call() -> None:
    """Issue 29: an idle worker held its last job, and so the call's closure (a model call's
    request and the callbacks of the session that made it) until its next call."""
    class Held:
        pass

    def keeping(obj: object):
        return lambda: obj

    held = Held()
    job = workers.submit(keeping(held))
    assert job.wait(10)
    gone = weakref.ref(held)
    del held, job
    gc.collect()
    assert gone() is None


def test_run_until_gives_what_the_call_returns_run_on_a_worker() -> None:
    seen: list[threading.Thread] = []

    def call() -> int:
        seen.append(threading.current_thread())
        return 7

    assert workers.run_until(call, lambda: False, poll=0.001, name="t") == 7
    assert seen[0] is not threading.current_thread()


def test_run_until_leaves_a_call_still_running_when_stopped() -> None:
    release, ended = threading.Event(), threading.Event()

    def slow() -> int:
        release.wait(10)
        ended.set()
        return 1

    asked: list[bool] = []

    def stopped() -> bool:
        asked.append(True)
        return len(asked) >= 2

    # Back while the call is still held: the caller did not wait for it.
    assert workers.run_until(slow, stopped, poll=0.001, name="t") is workers.STOPPED
    assert not ended.is_set()
    release.set()
    assert ended.wait(10)


def test_run_until_raises_what_the_call_raises_on_the_callers_thread() -> None:
    def boom() -> None:
        raise KeyError("from the worker")

    with pytest.raises(KeyError, match="from the worker"):
        workers.run_until(boom, lambda: False, poll=0.001, name="t")
