"""What the pure stages know of tools: their specs, and the outcome of a run."""

from __future__ import annotations

import json

import attrs

from stages.log.messages import ToolCall, canonical_arguments, canonical_json


def _wire(spec: ToolSpec) -> str:
    return canonical_json({"type": "function", "function": {
        "name": spec.name, "description": spec.description,
        "parameters": json.loads(spec.parameters)}})


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool as the model sees it. ``parameters`` is a JSON Schema as canonical JSON text.

    ``interactive`` tools (they wait for a person) force a batch to run sequentially;
    ``read_only`` tools do not need the log fsynced before they run; ``requires_approval``
    tools ask a person first (``stages.tools.approvals``).
    """

    name: str
    description: str
    parameters: str
    interactive: bool = False
    read_only: bool = False
    # Rules 8: every call waits for a person's approval before it runs.
    requires_approval: bool = False
    wire: str = attrs.field(init=False, eq=False, repr=False,
                            default=attrs.Factory(_wire, takes_self=True))


@attrs.frozen(kw_only=True)
class ToolInvocation:
    """A validated call handed to the tool runner; ``arguments`` is canonical JSON of an object."""

    call_id: str
    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class ToolOutcome:
    """The result of running one tool. ``content`` is what the model will read."""

    call_id: str
    name: str
    content: str
    ok: bool
    error: str | None = None
    duration_ms: float = 0.0
    # Rules 7: what the injection scan found in ``content`` when it was returned. Recorded
    # with the result, so that a replay marks it as the live run did whatever the scan of
    # the replaying version finds.
    findings: tuple[str, ...] = ()


def call_key(call: ToolCall) -> str:
    """What makes two calls the same call: the name and the canonical arguments."""
    return f"{call.name}\0{canonical_arguments(call.arguments)}"
