"""Joining the parts of an answer cut at the output limit: a space where the text shows a word
boundary the model dropped, nothing where it may be one word cut in two."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.turn.seams import join_parts, needs_space


@pytest.mark.parametrize(("before", "after", "joined"), [
    ("It is done.", "Then it ends.", "It is done. Then it ends."),
    ('He said "stop!"', "and left", 'He said "stop!" and left'),
    ("Is it?", "yes", "Is it? yes"),
    ("red, green,", "blue", "red, green, blue"),
    ("the three steps:", "first", "the three steps: first"),
    ("it is done", "Then", "it is done Then"),
    ("(see the end.)", "Next", "(see the end.) Next"),
])
def test_a_word_boundary_the_text_shows_gets_its_space(before, after, joined) -> None:
    assert join_parts([before, after]) == joined


@pytest.mark.parametrize(("before", "after"), [
    ("the quick bro", "wn fox"),  # cut inside a word
    ("the quick brown", "fox"),  # the text cannot tell: the prompt asks for the space
    ("pi is 3.", "14"),
    ("run main.", "py"),
    ("at host:", "8080"),
    ("1,", "000 people"),
    ("call getUser", "Name()"),
    ("over HT", "TP"),
    ("e.g.", "the"),
    ("ends here ", "Next"),  # the space is there already
    ("ends here", " Next"),
    ("```python\nx = 1.", "Real"),  # inside a code fence
    ("run `a.", "B` now"),  # inside inline code
    ("", "Start"),
    ("End.", ""),
])
def test_no_space_where_the_seam_may_be_inside_a_word_or_code(before, after) -> None:
    assert join_parts([before, after]) == before + after


def test_three_parts_are_joined_seam_by_seam() -> None:
    assert join_parts(["One.", "Two.", "three"]) == "One. Two.three"
    assert join_parts(["solo"]) == "solo" and join_parts([]) == ""


@given(st.lists(st.text(max_size=12), max_size=5))
def test_joining_only_ever_adds_single_spaces_between_parts(parts: list[str]) -> None:
    joined = join_parts(parts)
    assert joined.replace(" ", "") == "".join(parts).replace(" ", "")
    assert len(joined) - len("".join(parts)) <= max(len(parts) - 1, 0)


def test_a_space_already_at_the_seam_is_never_doubled() -> None:
    assert not needs_space("a. ", "B") and not needs_space("a.", " B")
