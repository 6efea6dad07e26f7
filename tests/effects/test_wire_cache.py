"""The per-message wire cache: identity-keyed, weakly held, safe when the collector runs."""

from __future__ import annotations

import gc
import threading

from effects.providers.wire import WireCache


class Key:
    """A key only the cyclic collector frees (it refers to itself)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.me = self


def test_a_value_is_built_once_per_live_key() -> None:
    built: list[int] = []
    cache: WireCache[Key, int] = WireCache(lambda k: built.append(k.n) or k.n * 2)
    key = Key(3)
    assert cache(key) == 6 and cache(key) == 6
    assert built == [3]


def test_a_dead_key_leaves_the_cache() -> None:
    cache: WireCache[Key, int] = WireCache(lambda k: k.n)
    cache(Key(1))
    gc.collect()
    assert cache._entries == {}


def test_the_collector_freeing_keys_inside_a_store_does_not_deadlock() -> None:
    """A collection can run at any allocation, also while the cache stores an entry; a dead
    key's callback then runs on the storing thread. It once took the store's own lock (the suite
    hung in the chat-completions adapter's tests)."""
    cache: WireCache[Key, int] = WireCache(lambda k: k.n)
    done = threading.Event()

    def churn() -> None:
        for n in range(20_000):
            cache(Key(n))  # each key becomes cyclic garbage at once
        done.set()

    threshold = gc.get_threshold()
    gc.set_threshold(1)  # collect at (nearly) every allocation
    try:
        worker = threading.Thread(target=churn, daemon=True)
        worker.start()
        worker.join(timeout=60)
    finally:
        gc.set_threshold(*threshold)
    assert done.is_set(), "the store deadlocked on a key freed during it"
