"""The public tool API: Python functions become tools the model can call.

    @tool
    def add(a: int, b: int = 1) -> int:
        '''Add two numbers.

        Args:
            a: The first addend.
            b: The second addend.
        '''
        return a + b

    add(2, 3)                                  # a Tool is still callable like the function
    add.invoke('{"a": "2"}', task_id="t-1")    # validated, coerced call, as the runner makes it
    registry = ToolRegistry([add, some_plain_function])

The parameters' JSON Schema comes from the signature and type hints (through a pydantic model),
the descriptions from the docstring (Google, reST, numpydoc, epydoc). A parameter named
``task_id`` is left out of the schema and injected at call time. Arguments the model sends are
validated and coerced against the signature (``"3"`` becomes ``3`` for an ``int``); arguments the
function does not take are ignored unless it has ``**kwargs``. A failure raises
:class:`ToolArgumentsError` naming the bad fields, which the tool runner turns into an error result.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, overload

import attrs

from stages.errors import ModelBehaviourError, UsageError
from stages.log.messages import canonical_json
from stages.log.tool_specs import ToolSpec

if TYPE_CHECKING:  # both are imported where a tool is built: a session without tools skips them
    import docstring_parser
    import pydantic

__all__ = ["TASK_ID_PARAM", "Tool", "ToolArgumentsError", "ToolRegistry", "tool"]

TASK_ID_PARAM = "task_id"
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")

Binder = Callable[[Mapping[str, object]], dict[str, object]]


class ToolArgumentsError(ModelBehaviourError):
    """The model's arguments for a tool are not a valid call; ``fields`` names the bad ones."""

    def __init__(self, message: str, *, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


# --- binding arguments -------------------------------------------------------------------------


@attrs.frozen
class _SchemaBinder:
    """For explicit schemas: the arguments must hold the required keys; passed on as given."""

    tool_name: str
    required: tuple[str, ...]

    def __call__(self, arguments: Mapping[str, object]) -> dict[str, object]:
        missing = tuple(key for key in self.required if key not in arguments)
        if missing:
            detail = "; ".join(f"{key}: Field required" for key in missing)
            raise ToolArgumentsError(
                f"invalid arguments for tool {self.tool_name!r}: {detail}", fields=missing)
        return dict(arguments)


@attrs.frozen
class _SignatureBinder:
    """For functions: validate and coerce through a pydantic model of the signature.

    Fields are named ``p0, p1, ...`` with the parameter names as aliases, so that any parameter
    name (``schema``, ``model_config``, ``_x``) is safe. Only arguments the model sent are passed
    on, so the function's own defaults apply to the others.
    """

    tool_name: str
    model: type[pydantic.BaseModel]
    params: tuple[tuple[str, str], ...]  # (field name, parameter name)

    def __call__(self, arguments: Mapping[str, object]) -> dict[str, object]:
        import pydantic

        try:
            validated = self.model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise _arguments_error(self.tool_name, exc) from None
        sent = validated.model_fields_set
        kwargs = {param: getattr(validated, field) for field, param in self.params if field in sent}
        kwargs.update(validated.model_extra or {})
        return kwargs


def _arguments_error(tool_name: str, exc: pydantic.ValidationError) -> ToolArgumentsError:
    fields: list[str] = []
    details: list[str] = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        fields.append(where)
        details.append(f"{where}: {error['msg']}")
    return ToolArgumentsError(
        f"invalid arguments for tool {tool_name!r}: {'; '.join(details)}",
        fields=tuple(dict.fromkeys(fields)))


def _parse_arguments(tool_name: str, arguments: str | Mapping[str, object]) -> Mapping[str, object]:
    if isinstance(arguments, Mapping):
        return arguments
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError) as exc:
        raise ToolArgumentsError(
            f"invalid arguments for tool {tool_name!r}: not valid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise ToolArgumentsError(
            f"invalid arguments for tool {tool_name!r}: expected a JSON object, "
            f"got {type(parsed).__name__}")
    return parsed


def _schema_binder(tool: Tool) -> Binder:
    required = json.loads(tool.spec.parameters).get("required", ())
    return _SchemaBinder(tool.spec.name, tuple(required))


# --- the Tool ----------------------------------------------------------------------------------

# Tools made from methods, by (function, name, description, interactive, read_only).
_METHOD_TOOLS: dict[tuple[object, ...], Tool] = {}


@attrs.frozen(kw_only=True)
class Tool:
    """A tool: what the model sees (``spec``) and the function that runs it (``handler``).

    Calling a Tool calls the handler unchanged; :meth:`invoke` is the call the tool runner makes
    with the model's JSON arguments.
    """

    spec: ToolSpec
    handler: Callable[..., object]
    wants_task_id: bool = False
    _binder: Binder = attrs.field(
        alias="binder", eq=False, repr=False,
        default=attrs.Factory(_schema_binder, takes_self=True))

    @property
    def name(self) -> str:
        return self.spec.name

    def __call__(self, *args: Any, **kwargs: Any) -> object:
        return self.handler(*args, **kwargs)

    def bind(self, arguments: str | Mapping[str, object]) -> dict[str, object]:
        """The keyword arguments for the handler (without ``task_id``); raises
        ToolArgumentsError."""
        return self._binder(_parse_arguments(self.spec.name, arguments))

    def invoke(self, arguments: str | Mapping[str, object], *, task_id: str = "") -> object:
        """Validate the model's arguments (JSON object text) and call the handler."""
        kwargs = self.bind(arguments)
        if self.wants_task_id:
            kwargs[TASK_ID_PARAM] = task_id
        return self.handler(**kwargs)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., object],
        *,
        name: str | None = None,
        description: str | None = None,
        interactive: bool = False,
        read_only: bool = False,
        requires_approval: bool = False,
    ) -> Tool:
        """A tool whose schema comes from ``fn``'s signature, type hints and docstring;
        ``requires_approval``: each call waits for a person's approval (rules 8)."""
        if requires_approval:
            made = cls.from_function(fn, name=name, description=description,
                                     interactive=interactive, read_only=read_only)
            return made.needing_approval()
        if inspect.ismethod(fn):
            # A method's schema is its class's: built once, then bound to each instance (a
            # gateway makes a toolset per session).
            key = (fn.__func__, name, description, interactive, read_only)
            if key not in _METHOD_TOOLS:
                _METHOD_TOOLS[key] = cls._from_function(fn, name=name, description=description,
                                                        interactive=interactive,
                                                        read_only=read_only)
            return attrs.evolve(_METHOD_TOOLS[key], handler=fn)
        return cls._from_function(fn, name=name, description=description,
                                  interactive=interactive, read_only=read_only)

    @classmethod
    def _from_function(cls, fn: Callable[..., object], *, name: str | None,
                       description: str | None, interactive: bool, read_only: bool) -> Tool:
        target = fn.func if isinstance(fn, functools.partial) else fn
        tool_name = _tool_name(name, target)
        import docstring_parser

        doc = docstring_parser.parse(inspect.getdoc(target) or "")
        params = _parameters(tool_name, fn)
        binder, schema = _signature_model(tool_name, params, _type_hints(target), _param_docs(doc))
        spec = _spec(tool_name, description if description is not None else _summary(doc),
                     schema, interactive=interactive, read_only=read_only)
        wants_task_id = any(p.name == TASK_ID_PARAM for p in params)
        return cls(spec=spec, handler=fn, wants_task_id=wants_task_id, binder=binder)

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, object],
        handler: Callable[..., object],
        *,
        interactive: bool = False,
        read_only: bool = False,
        requires_approval: bool = False,
    ) -> Tool:
        """A tool with an explicit JSON Schema; the handler gets the arguments as keywords.

        Only the presence of ``required`` keys is checked; ``task_id`` is injected when the
        handler has a parameter of that name.
        """
        if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
            raise UsageError(f"tool {name!r}: parameters must be a JSON Schema of type 'object'")
        spec = _spec(_tool_name(name, handler), description, dict(parameters),
                     interactive=interactive, read_only=read_only)
        made = cls(spec=spec, handler=handler, wants_task_id=_takes_task_id(handler))
        return made.needing_approval() if requires_approval else made

    def needing_approval(self) -> Tool:
        """This tool, each of whose calls waits for a person's approval (rules 8)."""
        return attrs.evolve(self, spec=attrs.evolve(self.spec, requires_approval=True))


def _spec(name: str, description: str, schema: dict[str, Any], *,
          interactive: bool, read_only: bool) -> ToolSpec:
    try:
        parameters = canonical_json(schema)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"tool {name!r}: parameters are not JSON: {exc}") from None
    return ToolSpec(name=name, description=description, parameters=parameters,
                    interactive=interactive, read_only=read_only)


def _tool_name(name: str | None, fn: object) -> str:
    resolved = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(resolved, str) or not _NAME_RE.match(resolved):
        raise UsageError(f"invalid tool name {resolved!r}: use 1-64 of [A-Za-z0-9_-]")
    return resolved


def _takes_task_id(fn: Callable[..., object]) -> bool:
    try:
        return TASK_ID_PARAM in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# --- signature and docstring ---------------------------------------------------------------------


def _parameters(tool_name: str, fn: Callable[..., object]) -> tuple[inspect.Parameter, ...]:
    try:
        params = tuple(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise UsageError(f"tool {tool_name!r}: no inspectable signature ({exc})") from None
    for param in params:
        if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
            raise UsageError(
                f"tool {tool_name!r}: parameter {param.name!r} cannot be passed by keyword")
    return params


def _type_hints(fn: object) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        return {}


def _signature_model(
    tool_name: str,
    params: tuple[inspect.Parameter, ...],
    hints: Mapping[str, Any],
    docs: Mapping[str, str],
) -> tuple[_SignatureBinder, dict[str, Any]]:
    import pydantic

    fields: dict[str, Any] = {}
    names: list[tuple[str, str]] = []
    extra: Literal["ignore", "allow"] = "ignore"
    for index, param in enumerate(params):
        if param.kind is param.VAR_KEYWORD:
            extra = "allow"
            continue
        if param.name == TASK_ID_PARAM:
            continue
        annotation = hints.get(param.name, param.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        field_kwargs: dict[str, Any] = {"alias": param.name}
        if param.name in docs:
            field_kwargs["description"] = docs[param.name]
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[f"p{index}"] = (annotation, pydantic.Field(default, **field_kwargs))
        names.append((f"p{index}", param.name))
    try:
        model = pydantic.create_model(
            f"{tool_name}_arguments", __config__=pydantic.ConfigDict(extra=extra), **fields)
        schema = model.model_json_schema()
    except (pydantic.PydanticUserError, NameError) as exc:
        raise UsageError(f"tool {tool_name!r}: cannot derive a schema: {exc}") from None
    return _SignatureBinder(tool_name, model, tuple(names)), _clean_schema(schema)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    cleaned = _strip_titles(schema)
    cleaned.setdefault("properties", {})
    cleaned.setdefault("required", [])
    cleaned.pop("additionalProperties", None)
    return cleaned


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's ``title`` keywords, keeping properties that happen to be named "title"."""
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


def _summary(doc: docstring_parser.Docstring) -> str:
    """The first paragraph of the docstring's description, on one line."""
    text = (doc.description or "").strip()
    first = _PARAGRAPH_BREAK.split(text, maxsplit=1)[0] if text else ""
    return " ".join(first.split())


def _param_docs(doc: docstring_parser.Docstring) -> dict[str, str]:
    return {p.arg_name: " ".join(p.description.split()) for p in doc.params if p.description}


# --- decorator ---------------------------------------------------------------------------------


@overload
def tool(fn: Callable[..., object], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None,
    interactive: bool = False, read_only: bool = False, requires_approval: bool = False,
) -> Callable[[Callable[..., object]], Tool]: ...


def tool(
    fn: Callable[..., object] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    interactive: bool = False,
    read_only: bool = False,
    requires_approval: bool = False,
) -> Tool | Callable[[Callable[..., object]], Tool]:
    """Make a :class:`Tool` of a function: ``@tool`` or ``@tool(interactive=True, ...)``;
    ``@tool(requires_approval=True)``: each call waits for a person's approval."""

    def decorate(func: Callable[..., object]) -> Tool:
        return Tool.from_function(func, name=name, description=description,
                                  interactive=interactive, read_only=read_only,
                                  requires_approval=requires_approval)

    return decorate if fn is None else decorate(fn)


# --- registry ----------------------------------------------------------------------------------


class ToolRegistry:
    """An immutable, ordered set of tools with unique names."""

    __slots__ = ("_specs", "_tools")
    _specs: tuple[ToolSpec, ...]
    _tools: Mapping[str, Tool]

    def __init__(self, tools: Iterable[Tool | Callable[..., object]] = ()) -> None:
        by_name: dict[str, Tool] = {}
        for item in tools:
            resolved = _as_tool(item)
            if resolved.spec.name in by_name:
                raise UsageError(f"duplicate tool name {resolved.spec.name!r}")
            by_name[resolved.spec.name] = resolved
        object.__setattr__(self, "_tools", MappingProxyType(by_name))
        object.__setattr__(self, "_specs", tuple(t.spec for t in by_name.values()))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ToolRegistry is immutable")

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def with_tools(self, *tools: Tool | Callable[..., object]) -> ToolRegistry:
        """A new registry with ``tools`` added after these (duplicates are a UsageError)."""
        return ToolRegistry((*self._tools.values(), *tools))

    def needing_approval(self, names: Iterable[str]) -> ToolRegistry:
        """These tools, those named needing a person's approval for each call (a per-tool
        setting: ``Agent(tool_approvals=["write_file"])``)."""
        wanted = set(names)
        if unknown := sorted(wanted - set(self._tools)):
            raise UsageError(f"tool_approvals names no tool of this agent: {', '.join(unknown)}")
        return ToolRegistry(t.needing_approval() if t.name in wanted else t for t in self)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)!r})"


def _as_tool(item: Tool | Callable[..., object]) -> Tool:
    if isinstance(item, Tool):
        return item
    if callable(item):
        return Tool.from_function(item)
    raise UsageError(f"not a tool or a function: {item!r}")
