"""Checking a turn's answer against its output type (what the ``CheckOutput`` effect's
performer calls: the agent hands it the check of each turn's output type).

A caller's Python type (a pydantic model, a dataclass, a TypedDict, ...) is checked by
pydantic's ``TypeAdapter``, so its own validators run; a plain JSON schema (the gateway's
``response_format``, a replayed or resumed session) by ``jsonschema``. Either way the result
is an ``OutputChecked`` event: the validated value as canonical JSON, or the errors the model
reads when it is asked again.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

import pydantic

from stages.log.events import OutputChecked
from stages.log.messages import canonical_json
from stages.log.output_spec import OutputSpec

Validator = Callable[[str], OutputChecked]
# Models that were asked for JSON in prose (a final answer after tools) often fence it.
_FENCED = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)
MAX_ERRORS = 10


def _parsed(text: str, spec: OutputSpec) -> Any:
    """The answer's JSON value (``ValueError`` if it is not JSON), unwrapped from
    ``response`` where the type is not an object."""
    fenced = _FENCED.match(text)
    value = json.loads(fenced.group(1) if fenced else text)
    if spec.wrapped:
        if not isinstance(value, dict) or "response" not in value:
            raise ValueError('the answer must be an object with a "response" field')
        return value["response"]
    return value


def _not_json(exc: ValueError) -> OutputChecked:
    return OutputChecked(valid=False, errors=f"the answer is not valid JSON: {exc}")


def type_validator(adapter: pydantic.TypeAdapter[Any], spec: OutputSpec) -> Validator:
    """Checks answers with ``adapter`` (the caller's own type, validators and all)."""
    def check(text: str) -> OutputChecked:
        try:
            value = adapter.validate_python(_parsed(text, spec))
        except pydantic.ValidationError as exc:
            return OutputChecked(valid=False, errors=_pydantic_errors(exc))
        except ValueError as exc:
            return _not_json(exc)
        return OutputChecked(valid=True, output=canonical_json(
            adapter.dump_python(value, mode="json")))
    return check


def _pydantic_errors(exc: pydantic.ValidationError) -> str:
    lines = [f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}"
             for e in exc.errors(include_url=False)[:MAX_ERRORS]]
    return "\n".join(lines)


@functools.lru_cache(maxsize=64)
def schema_validator(spec: OutputSpec) -> Validator:
    """Checks answers against the JSON schema ``spec`` carries (made once per schema)."""
    import jsonschema  # only for schemas: a caller's types are pydantic's to check
    schema = json.loads(spec.schema)
    if spec.wrapped:
        schema = schema.get("properties", {}).get("response", {})
    checker = jsonschema.validators.validator_for(schema)(schema)

    def check(text: str) -> OutputChecked:
        try:
            value = _parsed(text, spec)
        except ValueError as exc:
            return _not_json(exc)
        errors = sorted(checker.iter_errors(value), key=lambda e: list(map(str, e.path)))
        if errors:
            return OutputChecked(valid=False, errors="\n".join(
                f"{'.'.join(map(str, e.path)) or '(root)'}: {e.message}"
                for e in errors[:MAX_ERRORS]))
        return OutputChecked(valid=True, output=canonical_json(value))
    return check
