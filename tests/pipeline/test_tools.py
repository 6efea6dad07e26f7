"""Tests for pipeline.tools: schemas from functions, argument binding, the decorator, the registry."""

from __future__ import annotations

import functools
import json
from typing import Annotated, Literal, Optional

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from effects.tools.executor import ThreadPoolToolRunner
from pipeline.tools import Tool, ToolArgumentsError, ToolRegistry, tool
from stages.errors import ModelBehaviourError, UsageError
from stages.log.tool_specs import ToolInvocation


def google_style(
    count: int,
    name: str,
    ratio: float,
    flag: bool,
    tags: list[str],
    limit: Optional[int] = None,
    mode: Literal["fast", "slow"] = "fast",
    title: str = "untitled",
) -> dict:
    """Search the archive
    for matching records.

    This second paragraph is not part of the description.

    Args:
        count: How many results
            to return.
        name: The query.
        ratio: A ratio.
        flag: Whether to flag.
        tags: Tags to match.
        limit: Optional cap.
        mode: Search mode.
        title: A property that is named "title".

    Returns:
        The results.
    """
    return {"count": count, "name": name, "ratio": ratio, "flag": flag, "tags": tags,
            "limit": limit, "mode": mode, "title": title}


def rest_style(path: str, depth: int = 2, task_id: str = "") -> str:
    """Walk a directory tree.

    :param path: Where to start.
    :param depth: How deep to go.
    :returns: A listing.
    """
    return f"{path}:{depth}:{task_id}"


GOOGLE_SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "description": "How many results to return."},
        "name": {"type": "string", "description": "The query."},
        "ratio": {"type": "number", "description": "A ratio."},
        "flag": {"type": "boolean", "description": "Whether to flag."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags to match."},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None,
                  "description": "Optional cap."},
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast",
                 "description": "Search mode."},
        "title": {"type": "string", "default": "untitled",
                  "description": 'A property that is named "title".'},
    },
    "required": ["count", "name", "ratio", "flag", "tags"],
}


# --- schema ------------------------------------------------------------------------------------


def test_google_docstring_schema_and_description() -> None:
    t = Tool.from_function(google_style)
    assert t.spec.name == "google_style"
    assert t.spec.description == "Search the archive for matching records."
    assert json.loads(t.spec.parameters) == GOOGLE_SCHEMA
    assert t.wants_task_id is False


def test_parameters_are_canonical_json_without_title_noise() -> None:
    params = Tool.from_function(google_style).spec.parameters
    assert params == json.dumps(json.loads(params), sort_keys=True, separators=(",", ":"))
    schema = json.loads(params)
    assert "title" not in schema
    assert all("title" not in prop for prop in schema["properties"].values())
    assert "title" in schema["properties"]  # a parameter of that name survives


def test_rest_docstring_and_task_id_left_out_of_schema() -> None:
    t = Tool.from_function(rest_style)
    assert t.spec.description == "Walk a directory tree."
    assert json.loads(t.spec.parameters) == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where to start."},
            "depth": {"type": "integer", "default": 2, "description": "How deep to go."},
        },
        "required": ["path"],
    }
    assert t.wants_task_id is True


def test_no_docstring_no_params() -> None:
    def ping():
        return "pong"

    t = Tool.from_function(ping)
    assert t.spec.description == ""
    assert json.loads(t.spec.parameters) == {"type": "object", "properties": {}, "required": []}
    assert t.invoke("") == "pong"


def test_overrides_and_flags() -> None:
    t = Tool.from_function(rest_style, name="walk", description="Custom.",
                           interactive=True, read_only=True)
    assert (t.spec.name, t.spec.description) == ("walk", "Custom.")
    assert t.spec.interactive and t.spec.read_only


def test_annotated_field_description_and_nested_model() -> None:
    class Point(pydantic.BaseModel):
        x: int
        y: int

    def place(at: Point, label: Annotated[str, pydantic.Field(description="Shown text.")]) -> str:
        return f"{label}@{at.x},{at.y}"

    # With postponed annotations a local class cannot be resolved by name: give real objects.
    place.__annotations__ = {"at": Point, "label": Annotated[str, pydantic.Field(
        description="Shown text.")], "return": str}
    t = Tool.from_function(place)
    schema = json.loads(t.spec.parameters)
    assert schema["properties"]["label"] == {"type": "string", "description": "Shown text."}
    assert schema["properties"]["at"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["properties"] == {"x": {"type": "integer"},
                                                      "y": {"type": "integer"}}
    assert t.invoke('{"at": {"x": "1", "y": 2}, "label": "p"}') == "p@1,2"


def test_unusual_parameter_names_are_safe() -> None:
    def odd(schema: str, model_config: int, json: bool = False) -> str:
        return f"{schema}-{model_config}-{json}"

    t = Tool.from_function(odd)
    assert set(json_props(t)) == {"schema", "model_config", "json"}
    assert t.invoke({"schema": "s", "model_config": "4"}) == "s-4-False"


def json_props(t: Tool) -> dict:
    return json.loads(t.spec.parameters)["properties"]


def test_partial_and_kwargs() -> None:
    def base(prefix: str, word: str) -> str:
        """Join words."""
        return prefix + word

    t = Tool.from_function(functools.partial(base, "pre-"), name="joined")
    assert t.spec.description == "Join words."
    assert list(json_props(t)) == ["word"]
    assert t.invoke('{"word": "x"}') == "pre-x"

    def loose(a: int, **rest: object) -> dict:
        return {"a": a, **rest}

    assert Tool.from_function(loose).invoke('{"a": "1", "b": [2]}') == {"a": 1, "b": [2]}


@pytest.mark.parametrize("bad", [
    lambda *args: None,
    lambda a, /: None,
])
def test_unsupported_signatures_are_usage_errors(bad) -> None:
    with pytest.raises(UsageError):
        Tool.from_function(bad, name="bad")


def test_invalid_name_and_unschemable_type_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="invalid tool name"):
        Tool.from_function(lambda: None)  # "<lambda>"

    class Opaque:
        pass

    def takes(thing: Opaque) -> None: ...

    takes.__annotations__ = {"thing": Opaque}
    with pytest.raises(UsageError, match="cannot derive a schema"):
        Tool.from_function(takes)

    def unresolvable(thing: Undefined) -> None: ...  # noqa: F821

    with pytest.raises(UsageError, match="cannot derive a schema"):
        Tool.from_function(unresolvable)


# --- binding and invoking ----------------------------------------------------------------------


def test_coercion_from_json_strings() -> None:
    t = Tool.from_function(google_style)
    result = t.invoke(json.dumps({"count": "3", "name": "q", "ratio": "0.5", "flag": "true",
                                  "tags": ["a"], "limit": "7"}))
    assert result == {"count": 3, "name": "q", "ratio": 0.5, "flag": True, "tags": ["a"],
                      "limit": 7, "mode": "fast", "title": "untitled"}


def test_defaults_are_the_functions_own() -> None:
    sentinel: list[int] = []

    def f(items: list[int] = sentinel) -> bool:  # noqa: B006
        return items is sentinel

    assert Tool.from_function(f).invoke("{}") is True


def test_validation_error_names_bad_fields() -> None:
    t = Tool.from_function(google_style)
    with pytest.raises(ToolArgumentsError) as caught:
        t.invoke('{"count": "many", "name": "q", "ratio": 1, "flag": true, "mode": "medium"}')
    err = caught.value
    assert isinstance(err, ModelBehaviourError)
    assert set(err.fields) == {"count", "tags", "mode"}
    assert "count:" in str(err) and "tags: Field required" in str(err)
    assert "'google_style'" in str(err)


@pytest.mark.parametrize("arguments", ["[1, 2]", "not json", '"text"'])
def test_arguments_must_be_a_json_object(arguments: str) -> None:
    with pytest.raises(ToolArgumentsError, match="invalid arguments"):
        Tool.from_function(rest_style).invoke(arguments)


def test_task_id_injected_and_not_taken_from_the_model() -> None:
    t = Tool.from_function(rest_style)
    assert t.invoke('{"path": "/x", "task_id": "forged"}', task_id="t-7") == "/x:2:t-7"


def test_extra_arguments_are_ignored() -> None:
    assert Tool.from_function(rest_style).invoke('{"path": "/", "bogus": 1}') == "/:2:"


@given(st.integers(), st.text())
def test_any_int_as_string_is_coerced(number: int, word: str) -> None:
    def echo(n: int, w: str) -> tuple:
        return n, w

    t = Tool.from_function(echo)
    assert t.invoke(json.dumps({"n": str(number), "w": word})) == (number, word)


# --- from_schema -------------------------------------------------------------------------------


def test_from_schema() -> None:
    seen: dict = {}

    def handler(query: str, task_id: str) -> str:
        seen.update(query=query, task_id=task_id)
        return "ok"

    params = {"type": "object", "properties": {"query": {"type": "string"}},
              "required": ["query"]}
    t = Tool.from_schema("search", "Search.", params, handler, read_only=True)
    assert json.loads(t.spec.parameters) == params
    assert t.spec.read_only and t.wants_task_id
    assert t.invoke('{"query": "x"}', task_id="t") == "ok"
    assert seen == {"query": "x", "task_id": "t"}
    with pytest.raises(ToolArgumentsError) as caught:
        t.invoke("{}")
    assert caught.value.fields == ("query",)


def test_from_schema_rejects_non_object_schema() -> None:
    with pytest.raises(UsageError):
        Tool.from_schema("x", "", {"type": "string"}, lambda: None)


# --- decorator ---------------------------------------------------------------------------------


def test_bare_decorator_keeps_the_function_callable() -> None:
    @tool
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    assert isinstance(add, Tool)
    assert add(2, 3) == 5
    assert add.invoke('{"a": "2"}') == 3
    assert add.name == "add" and add.spec.description == "Add two numbers."


def test_decorator_with_options() -> None:
    @tool(interactive=True, read_only=True, name="ask")
    def clarify(question: str) -> str:
        return question

    assert clarify.spec.name == "ask"
    assert clarify.spec.interactive and clarify.spec.read_only
    assert clarify("why?") == "why?"


# --- registry ----------------------------------------------------------------------------------


def test_registry_accepts_tools_and_functions_in_order() -> None:
    reg = ToolRegistry([rest_style, tool(google_style)])
    assert reg.names == ("rest_style", "google_style")
    assert [s.name for s in reg.specs] == ["rest_style", "google_style"]
    assert "rest_style" in reg and "nope" not in reg
    assert reg.get("nope") is None
    assert reg.get("google_style").spec.name == "google_style"
    assert len(reg) == 2 and [t.name for t in reg] == list(reg.names)


def test_registry_duplicates_and_garbage_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="duplicate"):
        ToolRegistry([rest_style, Tool.from_function(google_style, name="rest_style")])
    with pytest.raises(UsageError):
        ToolRegistry([42])  # type: ignore[list-item]


def test_registry_is_immutable_and_extends_by_copy() -> None:
    reg = ToolRegistry([rest_style])
    with pytest.raises(AttributeError):
        reg.extra = 1  # type: ignore[attr-defined]
    bigger = reg.with_tools(google_style)
    assert reg.names == ("rest_style",)
    assert bigger.names == ("rest_style", "google_style")
    with pytest.raises(UsageError):
        bigger.with_tools(rest_style)


# --- through the real runner -------------------------------------------------------------------


def test_runner_turns_bad_arguments_into_an_error_outcome() -> None:
    reg = ToolRegistry([google_style, rest_style])
    calls = [ToolInvocation(call_id="c1", name="google_style", arguments='{"count":"x"}'),
             ToolInvocation(call_id="c2", name="rest_style", arguments='{"path":"/p"}')]
    with ThreadPoolToolRunner(reg) as runner:
        bad, good = runner.run(calls, concurrent=True, task_id="t-1")
    assert not bad.ok and bad.error.startswith("ToolArgumentsError: invalid arguments")
    assert "count:" in bad.error and "tags: Field required" in bad.error
    assert json.loads(bad.content) == {"error": bad.error}
    assert good.ok and good.content == "/p:2:t-1"


def test_a_method_s_schema_is_built_once_and_each_tool_calls_its_own_instance() -> None:
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def bump(self, by: int) -> int:
            """Add to the count.

            Args:
                by: how much to add
            """
            self.n += by
            return self.n

    first, second = Counter(), Counter()
    a, b = Tool.from_function(first.bump), Tool.from_function(second.bump)
    assert a.spec is b.spec and a.spec.name == "bump"
    assert b.invoke('{"by": 2}') == 2 and (first.n, second.n) == (0, 2)
    with pytest.raises(ToolArgumentsError):
        b.invoke('{"by": "many"}')
