"""The turn-loop properties of ``test_properties`` on resilient sessions: retries with backoff,
pools of keys with a refresh hook, fallback chains, a memory provider, dangerous commands that
wait for an approval (``tests.strategies.scripts.Resilience``). The simulation checks the
recovery chain's rules after every event (``tests.strategies.recovery_checks``); these tests
add the turn's own checks, the fold, abandoning anywhere, and that the generated sessions do
reach every path.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from stages.fold import fold
from stages.log import events as ev
from stages.log.alternation import violations
from stages.turn.step import decide_abandon
from tests.stages.test_properties import check_logs, check_turn
from tests.strategies.replay import replayed
from tests.strategies.scripts import (
    CallStep,
    CutStep,
    FailStep,
    ReplyStep,
    Resilience,
    SessionScript,
    TurnScript,
    session_scripts,
)
from tests.strategies.simulation import Driver, check_pairs, drive

SCRIPTS = session_scripts(resilient=True)


def _turn(*steps, **answers) -> TurnScript:
    return TurnScript(user="go", steps=steps, **answers)


_LS = ReplyStep(content=None, calls=(CallStep(name="terminal", arguments='{"command":"ls"}'),))
_RM = ReplyStep(content=None, calls=(CallStep(name="terminal",
                                               arguments='{"command":"rm -rf build"}'),))


def _decided(action: str, reason: str | None = None) -> Callable[[list[ev.Event]], bool]:
    return lambda events: any(isinstance(e, ev.RecoveryDecided) and e.action == action
                              and reason in (None, e.reason) for e in events)


def _observed(kind: type, **fields: object) -> Callable[[list[ev.Event]], bool]:
    return lambda events: any(isinstance(e, kind) and all(
        getattr(e, k) == v for k, v in fields.items()) for e in events)


PATHS = {
    "backoff": _observed(ev.Waited),
    "backoff interrupted": _observed(ev.Interrupted, during="backoff"),
    "refresh": _observed(ev.CredentialRefreshed, refreshed=True),
    "failed refresh": _observed(ev.CredentialRefreshed, refreshed=False),
    "rotation": _decided("rotate"),
    "fallback after a failure": _decided("fallback"),
    "fallback when every key rests": _decided("fallback", "credentials_exhausted"),
    "approval": _observed(ev.ApprovalAnswered),
    "denied approval": _observed(ev.ApprovalAnswered, choice="deny"),
    "memory recall": _observed(ev.MemoryPrefetched),
    "given up after retries": lambda events: _decided("retry")(events) and any(
        isinstance(e, ev.TurnFinished) and e.failed for e in events),
}
"""The resilience paths a session may take; ``--hypothesis-show-statistics`` counts them."""


@settings(max_examples=100, deadline=None)
@given(SCRIPTS)
# A compression inside a turn with recalled memory: the recall went to a message index the
# compaction had removed (IndexError in ``with_recall``; found by this simulation).
@example(SessionScript(max_turns=1, history=(("", ""),), context_length=290, turns=(
    _turn(ReplyStep(content=None, calls=(CallStep(name="read", arguments="{}"),))),
    _turn(_LS)), resilience=Resilience(max_retries=1, chain=(("p", "m", 0),), refresh=False,
                                       strategy="fill_first", memory=True, clock_step=0.5)))
# Two keys, both refused once: the hook renews the first, the second rests, then the fallback.
@example(SessionScript(max_turns=3, turns=(_turn(
    FailStep(error_type="ProviderHTTPError", message="bad key", status=401),
    FailStep(error_type="ProviderHTTPError", message="bad key", status=401),
    FailStep(error_type="ProviderHTTPError", message="slow down", status=429),
    FailStep(error_type="ProviderHTTPError", message="slow down", status=429), _RM,
    refreshed=(False, True), approvals=("deny",)),),
    resilience=Resilience(max_retries=2, chain=(("p", "m", 2), ("q", "m-q", 1)), refresh=True,
                          strategy="round_robin", memory=False, clock_step=0.5)))
# The only key refused (no hook): it rests, the turn falls back; the next turn starts on the
# primary again and, its key still resting, falls back before calling.
@example(SessionScript(max_turns=1, turns=(
    _turn(FailStep(error_type="ProviderHTTPError", message="", status=401), _LS),
    _turn(CutStep())), resilience=Resilience(
        max_retries=1, chain=(("p", "m", 1), ("q", "m-q", 0)), refresh=False,
        strategy="fill_first", memory=False, clock_step=0.5)))
# The user interrupts the backoff.
@example(SessionScript(max_turns=1, turns=(
    _turn(FailStep(error_type="ProviderHTTPError", message="", status=None),
          interrupt_backoff=True),), resilience=Resilience(
        max_retries=1, chain=(("p", "m", 0),), refresh=False, strategy="fill_first",
        memory=False, clock_step=0.5)))
def test_resilient_turns_keep_alternation_budget_and_fold_equality(
        script: SessionScript) -> None:
    driver = drive(script, check_turn)
    assert fold(driver.events) == driver.state
    check_logs(driver, script)
    for path, reached in PATHS.items():
        if reached([e for log in driver.logs for e in log]):
            event(path)


@settings(max_examples=40, deadline=None)
@given(session_scripts(max_turns=2, resilient=True), st.data())
def test_abandoning_a_resilient_turn_at_any_point_closes_it(script: SessionScript,
                                                            data: st.DataObject) -> None:
    """Killed between a failure and its retry, a refresh or an approval: the fold, closed by
    ``decide_abandon``, alternates and takes another turn."""
    events = drive(script).events
    cut = data.draw(st.integers(2, len(events)), label="cut")
    state = fold(decide_abandon(fold(events[:cut])).events, fold(events[:cut]))
    assert violations(state.messages) == []
    check_pairs(state.messages)
    # A new process resumes the session through the session machine, which closes the turn.
    resumed = Driver.resuming(events[:cut])
    # After the resume: the abandoned turn's closing, then the sandbox probe of the new process.
    closing = [e for e in resumed.events[cut + 1:] if not isinstance(e, ev.SandboxProbed)]
    assert closing == list(decide_abandon(fold(events[:cut])).events)
    assert isinstance(resumed.events[-1], ev.SandboxProbed)
    assert resumed.state.turn is None or resumed.state.turn.finished is not None
    resumed.run_turn(99, TurnScript(user="are you there?", steps=()), None)
    assert violations(resumed.state.messages) == []
    assert replayed(resumed.events) == resumed.events
