"""What ``Agent.run(..., output_type=X)`` accepts, made into the turn's ``OutputSpec`` and the
check of its answers: a pydantic model, a dataclass, a TypedDict or any type pydantic's
``TypeAdapter`` handles (validated by pydantic, the type's own validators included), or a
JSON schema as a dict (validated by ``jsonschema``). Both load when an output type is first
given, not with the agent."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from pipeline.config import settings_table
from stages.errors import UsageError
from stages.log.messages import canonical_json
from stages.log.output_spec import OutputSpec

if TYPE_CHECKING:
    import pydantic

    from pipeline.output_check import Validator

DEFAULT_NAME = "final_answer"
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")


@attrs.frozen
class OutputType:
    """A turn's output type: its spec, the check of an answer, and how the validated JSON
    becomes the value the caller gets back (as it is, without an adapter)."""

    spec: OutputSpec
    check: Validator
    adapter: pydantic.TypeAdapter[Any] | None

    def value(self, data: Any) -> Any:
        """The caller's typed value of a validated answer's JSON data."""
        return data if self.adapter is None else self.adapter.validate_python(data)


def _name(raw: object) -> str:
    # OpenAI names a schema with letters, digits, _ and - (at most 64).
    name = _NOT_NAME.sub("_", str(raw or ""))[:64].strip("_")
    return name or DEFAULT_NAME


def spec_of_schema(schema: Mapping[str, Any], *, name: object = None, strict: bool = False,
                   description: str | None = None, checked: bool = False) -> OutputSpec:
    """An ``OutputSpec`` of a JSON schema (checked against its meta-schema unless it is
    known good: pydantic's); one whose root is not an object is wrapped in
    ``{"response": ...}`` (providers require an object at the root)."""
    if not isinstance(schema, Mapping):
        raise UsageError(f"an output schema must be a JSON object, not {type(schema).__name__}")
    if not checked:
        _check_schema(schema)
    body = dict(schema)
    wrapped = body.get("type") != "object"
    if wrapped:
        defs = body.pop("$defs", None)
        body = {"type": "object", "properties": {"response": body}, "required": ["response"],
                **({"$defs": defs} if defs else {})}
    try:
        text = canonical_json(body)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"the output schema is not JSON: {exc}") from exc
    return OutputSpec(name=_name(name or schema.get("title")), schema=text, strict=strict,
                      description=description or schema.get("description"), wrapped=wrapped)


def _check_schema(schema: Mapping[str, Any]) -> None:
    import jsonschema
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise UsageError(f"the output schema is not a valid JSON schema: {exc.message}") from exc


def output_type(value: Any) -> OutputType:
    """The ``OutputType`` of ``value``: a type, or a JSON schema as a dict. Made once per
    type or schema: a schema, its check and pydantic's adapter take milliseconds to build,
    more than the rest of a turn's own work."""
    if isinstance(value, OutputType):
        return value
    if isinstance(value, OutputSpec):  # a schema already made a spec (the gateway's)
        return _of_spec(value)
    if isinstance(value, Mapping):
        try:
            key = canonical_json(value)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"the output schema is not JSON: {exc}") from exc
        return _of_schema(key)
    try:
        hash(value)
    except TypeError:  # not a type (a list of types...): made afresh, or refused
        return _made(value)
    return _of_type(value)


@functools.lru_cache(maxsize=64)
def _of_schema(schema_json: str) -> OutputType:
    return _of_spec(spec_of_schema(json.loads(schema_json)))


def _of_spec(spec: OutputSpec) -> OutputType:
    from pipeline.output_check import schema_validator
    return OutputType(spec, schema_validator(spec), None)


@functools.lru_cache(maxsize=64)
def _of_type(value: Any) -> OutputType:
    return _made(value)


def _made(value: Any) -> OutputType:
    import pydantic

    from pipeline.output_check import type_validator
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(value)
        schema = adapter.json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError,
            TypeError) as exc:
        raise UsageError(f"output_type {value!r} has no JSON schema: {exc}") from exc
    spec = spec_of_schema(schema, name=getattr(value, "__name__", None), checked=True)
    return OutputType(spec, type_validator(adapter, spec), adapter)


# config.toml's ``[output]`` key -> the recorded setting.
_KEYS = {"retries": "output_retries", "mode": "output_mode"}


def output_values(section: Any, **given: Any) -> dict[str, Any]:
    """The structured-output settings given as arguments (``output_retries``,
    ``output_mode``), else those of ``[output]`` in config.toml; a bad value is a
    ``UsageError`` naming it."""
    return settings_table("output", section, given, _KEYS)
