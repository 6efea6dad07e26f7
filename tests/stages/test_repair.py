"""Tool-call repair: named examples and the property that a valid call is never changed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.log.messages import ToolCall, canonical_json
from stages.tools.repair import repair, repair_arguments, repair_name
from tests.strategies.events import identifiers, json_objects

NAMES = ("read_file", "write_file", "search_files", "terminal", "patch", "todo")


@pytest.mark.parametrize(("sent", "meant"), [
    ("ReadFile", "read_file"), ("read-file", "read_file"), ("READ_FILE", "read_file"),
    ("read_file_tool", "read_file"), ("readFileTool", "read_file"), ('read_file">', "read_file"),
    ("read_fiel", "read_file"), ("terminl", "terminal"), ("wrte_file", "write_file"),
    ("Terminal Tool", "terminal"),
])
def test_names_whose_intent_is_clear_are_repaired(sent, meant) -> None:
    assert repair_name(sent, NAMES) == meant


@pytest.mark.parametrize("sent", ["file", "launch_rockets", "search", "x", ""])
def test_names_without_a_clear_intent_are_left(sent) -> None:
    assert repair_name(sent, NAMES) is None


def test_a_near_miss_between_two_tools_is_not_guessed() -> None:
    assert repair_name("file_a", ("file_b", "file_c")) is None


@pytest.mark.parametrize(("sent", "fixed", "what"), [
    ('"{\\"path\\": \\"a.py\\"}"', '{"path": "a.py"}', "arguments_unwrapped"),
    ('{"path": "a.py",}', '{"path": "a.py"}', "trailing_commas"),
    ('{"ids": [1, 2,], }', '{"ids": [1, 2] }', "trailing_commas"),
])
def test_arguments_are_repaired(sent, fixed, what) -> None:
    assert repair_arguments(sent) == (fixed, what)


@pytest.mark.parametrize("sent", ['{"a": 1}', "", "{oops", '"just text"', "[1, 2]", '{"a": ,}'])
def test_fine_or_hopeless_arguments_are_left(sent) -> None:
    assert repair_arguments(sent) is None


def test_a_repair_lists_what_it_fixed() -> None:
    fixed = repair(ToolCall(id="c1", name="ReadFile", arguments='{"path": "a",}'), NAMES)
    assert fixed is not None and fixed.repairs == ("name", "trailing_commas")
    assert fixed.call == ToolCall(id="c1", name="read_file", arguments='{"path": "a"}')


@given(st.sampled_from(NAMES), json_objects.map(canonical_json), identifiers)
def test_a_valid_call_is_never_changed(name, arguments, call_id) -> None:
    assert repair(ToolCall(id=call_id, name=name, arguments=arguments), NAMES) is None


@given(st.text(max_size=30), st.text(max_size=60))
def test_a_repair_always_yields_a_known_name_or_an_object(name, arguments) -> None:
    fixed = repair(ToolCall(id="c", name=name, arguments=arguments), NAMES)
    if fixed is None:
        return
    if "name" in fixed.repairs:
        assert fixed.call.name in NAMES
    if fixed.call.arguments != arguments:
        assert isinstance(json.loads(fixed.call.arguments), dict)
