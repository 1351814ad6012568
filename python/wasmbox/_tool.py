"""`Tool`: a Python callable a guest may call, with a name, a description and a JSON
Schema for its arguments (the Rust `wasmbox::Tool`)."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar, overload

from ._errors import ToolRegistrationError
from ._schema import function_schema, is_pydantic_model, model_schema

__all__ = ["Tool", "tool"]

F = TypeVar("F", bound=Callable[..., Any])


def _is_async(function: Callable[..., Any]) -> bool:
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.iscoroutinefunction(function):
        return True
    call = getattr(function, "__call__", None)  # noqa: B004 - a callable object's method
    return call is not None and inspect.iscoroutinefunction(call)


def _summary(function: Callable[..., Any]) -> str:
    doc = inspect.getdoc(function) or ""
    return doc.split("\n\n", 1)[0].strip()


class Tool:
    """A tool the guest calls as ``tools.<name>(**args)`` (Python) or
    ``await tools.<name>({...})`` (JavaScript).

    ``function`` may be sync or ``async``; it is called with the arguments as keyword
    arguments after the broker checked them against ``args_schema``. The schema is
    derived from the type hints unless given: a dict (a JSON Schema object) or a
    pydantic model class, whose validated instance the function then receives (when its
    one parameter is annotated with that model) or whose fields it receives as keyword
    arguments. Whatever the function raises reaches the guest as ``ToolFailed`` with
    ``TypeName: message`` — keep secrets out of exception messages.
    ``timeout_ms`` overrides the run's ``Limits.tool_timeout_ms`` for this tool.

    A sync function runs on a thread of the extension's pool, so one that blocks holds up
    only its own call, and its deadline ends the call (not the function). ``inline=True``
    runs it on the thread driving the run instead, which saves the two thread handoffs
    that are most of a tool call's cost from Python (docs/performance.md), for fast
    functions that never block: while one runs, neither its deadline nor the run's can
    end it, and under ``run_async`` it holds a thread the runs share.
    """

    __slots__ = ("function", "name", "description", "args_schema", "timeout_ms", "is_async", "inline", "_call")

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        args_schema: dict[str, Any] | type | None = None,
        timeout_ms: int | None = None,
        inline: bool = False,
    ) -> None:
        if not callable(function):
            raise ToolRegistrationError(f"a tool must be callable, got {type(function).__name__}")
        self.function = function
        self.name: str = name or getattr(function, "__name__", "")
        self.description: str = description if description is not None else _summary(function)
        self.timeout_ms = timeout_ms
        self.is_async = _is_async(function)
        if inline and self.is_async:
            raise ToolRegistrationError(f"tool `{self.name}`: an async tool runs on its event loop, never inline")
        self.inline = inline
        call: Callable[..., Any] = function
        if args_schema is None:
            schema = function_schema(function)
        elif is_pydantic_model(args_schema):
            schema = model_schema(args_schema)
            call = _model_adapter(function, args_schema, self.is_async)
        elif isinstance(args_schema, dict):
            schema = args_schema
        else:
            raise ToolRegistrationError(
                f"args_schema of tool `{self.name}` must be a JSON Schema dict or a pydantic model class"
            )
        self.args_schema: dict[str, Any] = schema
        self._call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, is_async={self.is_async})"

    def _spec(self) -> tuple[str, str, dict[str, Any], Callable[..., Any], bool, int | None, bool]:
        return (self.name, self.description, self.args_schema, self._call, self.is_async, self.timeout_ms, self.inline)


def _model_adapter(function: Callable[..., Any], model: Any, is_async: bool) -> Callable[..., Any]:
    parameters = list(inspect.signature(function).parameters.values())
    takes_model = len(parameters) == 1 and parameters[0].annotation in (model, model.__name__)

    def arguments(kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        instance = model.model_validate(kwargs)
        if takes_model:
            return (instance,), {}
        return (), dict(instance)

    if is_async:

        async def call_async(**kwargs: Any) -> Any:
            args, named = arguments(kwargs)
            return await function(*args, **named)

        return call_async

    def call(**kwargs: Any) -> Any:
        args, named = arguments(kwargs)
        return function(*args, **named)

    return call


@overload
def tool(function: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    args_schema: dict[str, Any] | type | None = None,
    timeout_ms: int | None = None,
    inline: bool = False,
) -> Callable[[F], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    args_schema: dict[str, Any] | type | None = None,
    timeout_ms: int | None = None,
    inline: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=..., timeout_ms=..., inline=...)`` makes a `Tool`."""
    if function is not None:
        return Tool(function)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f, name=name, description=description, args_schema=args_schema, timeout_ms=timeout_ms, inline=inline
        )

    return wrap
