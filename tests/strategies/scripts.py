"""Scripts of simulated model behaviour for turn-loop properties.

A :class:`SessionScript` is a sequence of turns; each turn is the user's message and the replies
the model will give, in order, as the loop asks for them (a loop that asks for more replies than
scripted gets a plain text answer). Replies are text, tool calls (to known or unknown tools, with
valid, empty, invalid or non-object JSON arguments) or a provider failure; a reply may be
followed by the user interrupting. The same scripts drive the pure driver in
``tests/stages/test_properties.py`` and the real pipeline in
``tests/pipeline/test_replay_properties.py``.
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st

from stages.log.messages import canonical_json
from tests.strategies.events import texts

__all__ = [
    "KNOWN_TOOLS",
    "CallStep",
    "CutStep",
    "FailStep",
    "ReplyStep",
    "SessionScript",
    "Step",
    "TurnScript",
    "arguments",
    "session_scripts",
    "turn_scripts",
]

KNOWN_TOOLS = ("read", "write", "ask")
"""The tools every scripted session declares (``ask`` is interactive, ``read`` read-only)."""


@attrs.frozen(kw_only=True)
class CallStep:
    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class ReplyStep:
    content: str | None
    calls: tuple[CallStep, ...] = ()
    reasoning: str | None = None
    then_interrupt: bool = False
    """The user interrupts while this reply arrives (seen at the loop's next step)."""


@attrs.frozen(kw_only=True)
class FailStep:
    error_type: str
    message: str
    status: int | None = None


@attrs.frozen(kw_only=True)
class CutStep:
    """The user interrupts during the model call itself (no reply arrives)."""


Step = ReplyStep | FailStep | CutStep


@attrs.frozen(kw_only=True)
class TurnScript:
    user: str
    steps: tuple[Step, ...]
    system_message: str | None = None
    interrupt_first: bool = False
    """The user interrupts before the first model call."""
    tool_ok: tuple[bool, ...] = (True,)
    """Whether each tool run succeeds, cycled over the turn's runs (pure driver only)."""


@attrs.frozen(kw_only=True)
class SessionScript:
    max_turns: int
    turns: tuple[TurnScript, ...]
    history: tuple[tuple[str, str], ...] | None = None
    """(user, assistant) pairs passed as the first turn's conversation history."""
    context_length: int | None = None
    compression: bool = True


_SHORT = st.text(max_size=12, alphabet=st.characters(exclude_categories=("Cs",)))

_VALID = st.fixed_dictionaries({}, optional={"path": _SHORT, "text": _SHORT, "n": st.integers()})

arguments = st.one_of(
    _VALID.map(canonical_json), _VALID.map(canonical_json), _VALID.map(canonical_json),
    st.sampled_from(["", "  ", "{oops", '{"path":', "[1, 2]", "3", "null", '"str"',
                     '{"text": "hi", "text": "dup"}', '{ "text" : "spaced" }']),
    texts,
)
"""Tool-call arguments: valid objects, empty, invalid JSON, non-object JSON, random text."""


def _calls(names: tuple[str, ...]) -> st.SearchStrategy[tuple[CallStep, ...]]:
    name = st.sampled_from((*names, *names, *names, "nope", "read "))
    return st.lists(st.builds(CallStep, name=name, arguments=arguments),
                    min_size=1, max_size=3).map(tuple)


def _steps(names: tuple[str, ...], cut: bool) -> st.SearchStrategy[Step]:
    interrupt = st.sampled_from((False,) * 7 + (True,))
    text = st.builds(ReplyStep, content=st.none() | texts, reasoning=st.none() | _SHORT,
                     then_interrupt=interrupt)
    calls = st.builds(ReplyStep, content=st.none() | texts, calls=_calls(names),
                      then_interrupt=interrupt)
    fail = st.builds(FailStep, error_type=st.sampled_from(("ProviderHTTPError",
                                                           "ProviderTimeoutError")),
                     message=_SHORT, status=st.none() | st.sampled_from((429, 500, 503)))
    # mostly tool calls (so turns go on and budgets run out), then text, failures, cuts
    options = [calls] * 6 + [text, text, fail]
    if cut:
        options.append(st.just(CutStep()))
    return st.one_of(*options)


def turn_scripts(names: tuple[str, ...] = KNOWN_TOOLS, *, cut: bool = True,
                 max_steps: int = 6) -> st.SearchStrategy[TurnScript]:
    return st.builds(
        TurnScript, user=texts,
        steps=st.lists(_steps(names, cut), min_size=1, max_size=max_steps).map(tuple),
        system_message=st.none() | st.sampled_from(("Be brief.", "Réponds en français.")),
        interrupt_first=st.sampled_from((False,) * 11 + (True,)),
        tool_ok=st.lists(st.booleans(), min_size=1, max_size=4).map(tuple))


def session_scripts(names: tuple[str, ...] = KNOWN_TOOLS, *, cut: bool = True,
                    max_turns: int = 3, max_steps: int = 6) -> st.SearchStrategy[SessionScript]:
    return st.builds(
        SessionScript, max_turns=st.integers(1, 4),
        turns=st.lists(turn_scripts(names, cut=cut, max_steps=max_steps), min_size=1,
                       max_size=max_turns).map(tuple),
        history=st.none() | st.lists(st.tuples(_SHORT, _SHORT), max_size=2).map(tuple),
        context_length=st.none() | st.integers(50, 5000))
