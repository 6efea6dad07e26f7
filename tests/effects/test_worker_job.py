"""A worker's job says when its call is done, to any number of waits, without an Event."""

from __future__ import annotations

import threading

from effects import workers


def test_a_job_is_not_done_until_its_call_returns_and_stays_done() -> None:
    release = threading.Event()
    job = workers.submit(lambda: release.wait(10) and None)
    assert not job.wait(0.01)
    assert not job.done()
    release.set()
    assert job.wait(10)
    assert job.done()
    assert job.wait(0) and job.wait(0)  # done stays done, for every later wait


def test_a_wait_elsewhere_does_not_make_a_finished_job_look_busy() -> None:
    job = workers.submit(lambda: None)
    assert job.wait(10)
    waiters = [threading.Thread(target=job.wait, args=(1,)) for _ in range(8)]
    for waiter in waiters:
        waiter.start()
    assert all(job.done() for _ in range(1000))
    for waiter in waiters:
        waiter.join()
