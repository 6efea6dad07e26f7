"""The rule set: every version's behaviours pinned, and the invariants of the table."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.log import events as ev
from stages.log.rules import RULES, RuleSet, rule_set
from tests.stages.helpers import SETTINGS

FLAGS = tuple(a.name for a in attrs.fields(RuleSet) if a.name != "version")

# The version each behaviour arrived in. A changed line here changes how old logs replay.
SINCE = {
    "retries_per_call": 2, "request_digest": 2, "cut_calls_rejected": 2,
    "abandoned_calls_rejected": 2,
    "tool_checks": 3, "assembled_prompt": 3, "subdirectory_hints": 3, "memory_recall": 3,
    "context_management": 3, "budget_note": 3, "early_end_retry": 3, "content_filter_fails": 3,
    "thinking_only_ends": 4, "turn_reasoning": 4, "reasoning_recovery": 4,
    "restart_replaces_answer": 5, "local_prefill": 5,
    "spaced_continuations": 6, "cut_answer_partial": 6,
    "checkpoints": 7,
    "shell_parser_check": 7,
    "unconfined_asks": 7,
    "untrusted_marked": 7, "wide_injection_scan": 7,
    "iterative_compression": 7,
    "todo_in_summary": 8, "sequential_one_by_one": 8, "client_tools": 8,
    "paused_approvals": 8, "declared_approvals": 8, "steering": 8, "image_recovery": 8, "named_window_limits": 8,
    "summary_must_shrink": 9, "token_notes": 9,
}


@pytest.mark.parametrize("version", range(1, RULES + 1))
def test_each_version_has_exactly_the_behaviours_of_the_table(version: int) -> None:
    rules = rule_set(version)
    assert rules.version == version
    assert {f: getattr(rules, f) for f in FLAGS} == {f: version >= SINCE[f] for f in FLAGS}


def test_the_table_names_every_flag() -> None:
    assert set(SINCE) == set(FLAGS)
    assert RULES == 9 == max(SINCE.values())


def test_one_shared_value_per_version() -> None:
    assert rule_set(3) is rule_set(3)
    assert SETTINGS.rule_set is rule_set(SETTINGS.rules)
    assert attrs.evolve(SETTINGS, rules=2).rule_set is rule_set(2)


@pytest.mark.parametrize("version", [-1, 0, RULES + 1, 99])
def test_an_unknown_version_is_refused(version: int) -> None:
    with pytest.raises(ValueError, match="unknown rules version"):
        rule_set(version)
    # Settings of a version this code cannot follow are never built (they used to run, a newer
    # version under the newest rules known here).
    with pytest.raises(ValueError, match="unknown rules version"):
        ev.SessionSettings(model="m", provider="p", rules=version)


@given(st.integers(1, RULES), st.integers(1, RULES))
def test_a_later_version_keeps_every_behaviour_of_an_earlier_one(a: int, b: int) -> None:
    older, newer = rule_set(min(a, b)), rule_set(max(a, b))
    assert all(getattr(newer, f) for f in FLAGS if getattr(older, f))


@given(st.integers(2, RULES))
def test_every_version_adds_a_behaviour(version: int) -> None:
    before, after = rule_set(version - 1), rule_set(version)
    assert any(getattr(after, f) and not getattr(before, f) for f in FLAGS)


def test_the_first_version_has_none_and_the_newest_all() -> None:
    assert not any(getattr(rule_set(1), f) for f in FLAGS)
    assert all(getattr(rule_set(RULES), f) for f in FLAGS)
