"""Pluggable scorers: each turns an answer into a number (higher is better), for the fork and
for the recorded session alike, so that scores pair up like any other measure.

* ``exact``: 1 when the answer is the recorded answer (whitespace at the ends aside), else 0;
* ``contains:TEXT``: 1 when the answer contains TEXT;
* ``regex:PATTERN``: 1 when PATTERN matches somewhere in the answer;
* ``py:module:function``: ``function(sample)`` with a :class:`Sample`, returning a number or a
  bool (None: no score);
* ``judge:MODEL`` or ``judge:MODEL@BASE_URL``: a model reads the question and the answer and
  gives a mark from 0 to 10 (scaled to 0..1); each judgement is a recorded session of its
  own under ``<out>/judge``, replayable like any other.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from stages.errors import MibyanError, UsageError

__all__ = ["Sample", "Scorer", "make_scorer", "score_all"]


@attrs.frozen(kw_only=True)
class Sample:
    """What a scorer sees: the turn's user message, the answer to score (None: the turn gave
    none), and the recorded answer of the same turn."""

    prompt: str
    answer: str | None
    recorded: str | None
    config: str  # the configuration's name, "recorded" for the recorded side


Scorer = Callable[[Sample], float | None]


def _flag(test: Callable[[str], bool]) -> Scorer:
    return lambda s: None if s.answer is None else float(test(s.answer))


def _function(spec: str) -> Scorer:
    module, _, name = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"scorer py:{spec}: cannot import {name or '?'} from {module}: "
                         f"{exc}") from exc
    if not callable(found):
        raise UsageError(f"scorer py:{spec} is not a function")

    def score(sample: Sample) -> float | None:
        value = found(sample)
        if value is not None and (not isinstance(value, int | float)):
            raise UsageError(f"scorer py:{spec} returned {value!r}, not a number")
        return None if value is None else float(value)
    return score


_MARK = re.compile(r"\b(10|[0-9])(?:\s*/\s*10)?\b")
JUDGE_PROMPT = ("Mark the answer to the question from 0 (useless or wrong) to 10 (correct and "
                "complete). Reply with the mark alone.\n\nQuestion:\n{prompt}\n\nAnswer:\n{answer}")


def _judge(spec: str, home: Path) -> Scorer:
    model, _, base_url = spec.partition("@")
    if not model:
        raise UsageError("scorer judge:MODEL[@BASE_URL] needs a model")

    def score(sample: Sample) -> float | None:
        if sample.answer is None:
            return None
        from pipeline.agent import Agent
        try:
            with Agent(model=model, base_url=base_url or None, home=home, stream=False,
                       durability="flush", checkpoints=False) as agent:
                reply = agent.run(JUDGE_PROMPT.format(prompt=sample.prompt,
                                                      answer=sample.answer)).final_response
        except MibyanError:
            return None  # a judge that fails gives no mark; the pair is left out
        found = _MARK.search(reply or "")
        return None if found is None else int(found.group(1)) / 10
    return score


def make_scorer(spec: str, *, out: Path) -> Scorer:
    """The scorer named by ``spec``; a UsageError for one that names none."""
    kind, _, arg = spec.partition(":")
    if spec == "exact":
        return lambda s: None if s.answer is None else float(
            s.answer.strip() == (s.recorded or "").strip())
    if kind == "contains" and arg:
        return _flag(lambda answer: arg in answer)
    if kind == "regex" and arg:
        try:
            pattern = re.compile(arg)
        except re.error as exc:
            raise UsageError(f"scorer {spec}: {exc}") from exc
        return _flag(lambda answer: pattern.search(answer) is not None)
    if kind == "py" and ":" in arg:
        return _function(arg)
    if kind == "judge":
        return _judge(arg, out / "judge")
    raise UsageError(f"unknown scorer {spec!r}: exact, contains:TEXT, regex:PATTERN, "
                     "py:module:function or judge:MODEL[@BASE_URL]")


def score_all(scorers: dict[str, Scorer], sample: Sample) -> dict[str, Any]:
    return {name: scorer(sample) for name, scorer in scorers.items()}
