"""JSON Schemas for tool arguments, derived from a function's type hints or given as a
pydantic model.

Plain types need nothing installed: ``int``, ``float``, ``str``, ``bool``, ``None``,
``list[T]``, ``tuple[...]``, ``dict[str, T]``, ``Optional``/unions, ``Literal``,
``enum.Enum`` subclasses, ``TypedDict``, dataclasses and ``Annotated[T, "description"]``.
Anything else (a pydantic model, ``datetime``, ...) goes to pydantic's ``TypeAdapter``
when pydantic is installed; without it, a type this module does not know raises
`ToolRegistrationError`, asking for an explicit ``args_schema``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import types
import typing
from typing import Any, Callable

from ._errors import ToolRegistrationError

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}


def is_pydantic_model(obj: Any) -> bool:
    """True for a pydantic ``BaseModel`` subclass (without importing pydantic)."""
    return isinstance(obj, type) and hasattr(obj, "model_json_schema") and hasattr(obj, "model_validate")


def model_schema(model: Any) -> dict[str, Any]:
    """The argument schema of a pydantic model: an object schema, its ``$defs`` at the root."""
    schema = dict(model.model_json_schema())
    schema.setdefault("type", "object")
    return schema


def function_schema(function: Callable[..., Any]) -> dict[str, Any]:
    """An object schema with one property per keyword parameter of ``function``.

    Parameters without a default are required; ``**kwargs`` allows other properties;
    positional-only and ``*args`` parameters cannot be passed by name and are refused.
    """
    signature = inspect.signature(function)
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to the raw ones
        hints = {name: p.annotation for name, p in signature.parameters.items()}
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra = False
    defs: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise ToolRegistrationError(
                f"parameter `{name}` of {getattr(function, '__name__', function)!r} cannot be passed by name: "
                "tools are called with keyword arguments"
            )
        annotation = hints.get(name, parameter.annotation)
        schema = _type_schema(annotation, defs, f"parameter `{name}`")
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
        elif _is_json(parameter.default):
            schema = {**schema, "default": parameter.default}
        properties[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": extra}
    if required:
        result["required"] = required
    if defs:
        result["$defs"] = defs
    return result


def _is_json(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str)) or (
        isinstance(value, (list, tuple)) and all(_is_json(v) for v in value)
    )


def _type_schema(annotation: Any, defs: dict[str, Any], where: str) -> dict[str, Any]:
    if annotation is inspect.Parameter.empty or annotation is Any or annotation is object:
        return {}
    if annotation in _PRIMITIVES:
        return dict(_PRIMITIVES[annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        schema = _type_schema(args[0], defs, where)
        descriptions = [a for a in args[1:] if isinstance(a, str)]
        if descriptions:
            schema = {**schema, "description": descriptions[0]}
        elif len(args) > 1:
            # Metadata this module does not read (pydantic's Field, constraints).
            return _pydantic_schema(annotation, defs, where)
        return schema
    if origin is typing.Union or origin is types.UnionType:
        return {"anyOf": [_type_schema(a, defs, where) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable, set, frozenset) or annotation in (list,):
        items = _type_schema(args[0], defs, where) if args else {}
        return {"type": "array", "items": items}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _type_schema(args[0], defs, where)}
        prefix = [_type_schema(a, defs, where) for a in args]
        return {"type": "array", "prefixItems": prefix, "minItems": len(prefix), "maxItems": len(prefix)}
    if origin in (dict, collections.abc.Mapping) or annotation is dict:
        if args and args[0] is not str:
            raise ToolRegistrationError(f"{where}: JSON object keys are strings, not {args[0]!r}")
        values = _type_schema(args[1], defs, where) if args else {}
        return {"type": "object", "additionalProperties": values}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    if is_pydantic_model(annotation):
        return _pydantic_schema(annotation, defs, where)
    if typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        required = sorted(getattr(annotation, "__required_keys__", hints.keys()))
        return {
            "type": "object",
            "properties": {k: _type_schema(v, defs, where) for k, v in hints.items()},
            "required": required,
        }
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        hints = typing.get_type_hints(annotation, include_extras=True)
        fields = dataclasses.fields(annotation)
        required = [
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {f.name: _type_schema(hints.get(f.name, Any), defs, where) for f in fields},
        }
        if required:
            schema["required"] = required
        return schema
    return _pydantic_schema(annotation, defs, where)


def _pydantic_schema(annotation: Any, defs: dict[str, Any], where: str) -> dict[str, Any]:
    try:
        import pydantic
    except ImportError:
        raise ToolRegistrationError(
            f"{where}: cannot derive a JSON Schema for {annotation!r} without pydantic; "
            "install pydantic or pass args_schema="
        ) from None
    try:
        schema = dict(pydantic.TypeAdapter(annotation).json_schema())
    except Exception as err:  # noqa: BLE001 - pydantic's own errors, reported as ours
        raise ToolRegistrationError(f"{where}: cannot derive a JSON Schema for {annotation!r}: {err}") from err
    # One document: nested definitions are hoisted to the root, where `#/$defs/...` points.
    defs.update(schema.pop("$defs", {}))
    return schema
