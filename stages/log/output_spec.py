"""What a turn asks its final answer to be: a JSON schema (``OutputSpec``), sent as the
provider's structured output where it has one, or as a final-answer tool the model calls."""

from __future__ import annotations

import attrs

from stages.log.tool_specs import ToolSpec

# The final-answer tool's name: a turn with tools (or a provider without structured output)
# ends when the model calls it with the answer as its arguments (pydantic-ai's convention).
FINAL_TOOL = "final_result"
OUTPUT_MODES = ("auto", "tool")


@attrs.frozen(kw_only=True)
class OutputSpec:
    """``schema`` is the JSON schema of the answer as canonical JSON text, always of an object
    (providers require one at the root); ``wrapped``: the answer is that object's
    ``response`` field (the caller's type was not an object)."""

    name: str
    schema: str
    strict: bool = False
    description: str | None = None
    wrapped: bool = False


def final_tool(spec: OutputSpec) -> ToolSpec:
    """The final-answer tool of ``spec``: its parameters are the answer's schema."""
    about = spec.description or f"the final answer ({spec.name})"
    return ToolSpec(name=FINAL_TOOL, parameters=spec.schema, read_only=True,
                    description=f"Give {about}. Call this once, when the answer is ready; "
                                "its arguments are the answer.")
