"""Checkpoints of the working tree (rules 7): when a turn asks for one, and which one a
rollback goes back to.

A turn asks once, before the first tool batch holding a call that may change the tree. A call
may change it unless its tool is declared ``read_only``, waits for a person (``interactive``),
or is one of the built-in tools that only touch mibyan's own state (the todo list, memory): a
tool mibyan does not know is taken to write, so a caller's own tools are covered too.
"""

from __future__ import annotations

from stages.decision import RestoreTree, RunTools, TakeCheckpoint
from stages.log.events import Checkpointed, SessionSettings
from stages.log.state import State
from stages.log.tool_specs import ToolSpec

# Built-in tools that are not read-only but never touch the working tree.
TREE_NEUTRAL = frozenset({"todo", "memory"})


def writes_tree(spec: ToolSpec) -> bool:
    """Whether a call of ``spec`` may change the working tree."""
    return not (spec.read_only or spec.interactive or spec.name in TREE_NEUTRAL)


def checkpoint_before(state: State, step: RunTools, *,
                      config: SessionSettings) -> TakeCheckpoint | None:
    """The checkpoint to take before ``step`` runs: the turn's first batch that may write,
    under rules 7; None otherwise."""
    turn = state.turn
    if not config.rule_set.checkpoints or turn is None or turn.checkpointed:
        return None
    specs = (state.tool(call.name) for call in step.calls)
    if not any(spec is not None and writes_tree(spec) for spec in specs):
        return None
    return TakeCheckpoint(turn=state.turns)


def checkpoint_of(checkpoints: tuple[Checkpointed, ...],
                  turn: int | None) -> Checkpointed | None:
    """The checkpoint taken before ``turn`` (None: the latest taken)."""
    if turn is None:
        return checkpoints[-1] if checkpoints else None
    return next((c for c in checkpoints if c.turn == turn), None)


def rollback_to(state: State, turn: int | None) -> RestoreTree:
    """Where a rollback to ``turn`` goes: its checkpoint, or nowhere when it has none."""
    found = checkpoint_of(state.checkpoints, turn)
    if found is None:
        return RestoreTree(turn=turn)
    return RestoreTree(turn=found.turn, tree=found.tree, commit=found.commit)
