"""The steering queue: what was sent and not yet taken, oldest first."""

from __future__ import annotations

import threading

from effects.steering import SteeringQueue


def test_take_joins_what_was_sent_and_empties_the_queue() -> None:
    queue = SteeringQueue()
    assert queue.take() is None
    queue.send("one")
    queue.send("two")
    assert queue.take() == "one\n\ntwo"
    assert queue.take() is None


def test_drop_forgets_what_was_sent_and_says_what_it_was() -> None:
    queue = SteeringQueue()
    queue.send("one")
    assert queue.drop() == ("one",)
    assert queue.drop() == () and queue.take() is None


def test_what_threads_send_while_others_take_is_taken_once_each() -> None:
    queue = SteeringQueue()
    taken: list[str] = []
    done = threading.Event()

    def collect() -> None:
        text = queue.take()
        if text is not None:
            taken.extend(text.split("\n\n"))

    def take() -> None:
        while not done.is_set():
            collect()

    takers = [threading.Thread(target=take) for _ in range(2)]
    senders = [threading.Thread(target=lambda n=n: [queue.send(f"{n}-{i}") for i in range(500)])
               for n in range(3)]
    for thread in (*takers, *senders):
        thread.start()
    for thread in senders:
        thread.join()
    done.set()
    for thread in takers:
        thread.join()
    collect()
    assert sorted(taken) == sorted(f"{n}-{i}" for n in range(3) for i in range(500))
