"""The think-tag splitter's fast paths (text without "<") decide as the plain search did."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stages.turn.think_tags import CLOSERS, OPENERS, ThinkSplitter, _find, _held_back, split_think


def _held_back_reference(buffer: str, tags: tuple[str, ...]) -> int:
    for size in range(min(len(buffer), max(map(len, tags)) - 1), 0, -1):
        tail = buffer[-size:]
        if any(tag.startswith(tail) for tag in tags):
            return size
    return 0


def _find_reference(buffer: str, tags: tuple[str, ...]) -> tuple[int, str] | None:
    hits = [(buffer.find(tag), tag) for tag in tags if tag in buffer]
    return min(hits) if hits else None


# Text made of tag pieces, so that partial and whole tags, "<" runs and near misses are common.
pieces = st.sampled_from(["<", "</", "<t", "<th", "<think", "<think>", "</think>", "<thinking",
                          "</thinking>", "hink", "ing>", ">", "a", " ", "<<", "\n"])
texts = st.lists(pieces, max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(texts, st.sampled_from([OPENERS, CLOSERS]))
def test_held_back_and_find_agree_with_the_plain_search(buffer, tags):
    assert _held_back(buffer, tags) == _held_back_reference(buffer, tags)
    assert _find(buffer, tags) == _find_reference(buffer, tags)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, max_size=8))
def test_a_stream_splits_as_the_whole_text(chunks):
    splitter = ThinkSplitter()
    out = [p for chunk in chunks for p in splitter.feed(chunk)] + splitter.finish()
    text = "".join(t for kind, t in out if kind == "text")
    assert text == split_think("".join(chunks))[0]
