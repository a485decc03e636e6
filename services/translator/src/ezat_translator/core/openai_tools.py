"""OpenAI function tools and ``tool_choice`` as Anthropic ``tools`` and ``tool_choice``.

Without tools, ``tool_choice`` and ``parallel_tool_calls`` are ignored (the page says so).
"""

from __future__ import annotations

from typing import Any

from ezat_common.errors import invalid
from ezat_common.schemas.openai import FunctionTool, NamedToolChoice

_CHOICES = {"auto": "auto", "required": "any", "none": "none"}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
CHAT_NAMED = '{"type": "function", "function": {"name": ...}}'


def to_tools(tools: list[FunctionTool], *, keep_cache: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        if tool.type != "function":
            raise invalid(
                f"tools[{i}].type", f"only function tools are supported; got {tool.type!r}"
            )
        fn = tool.function
        tool_cache = tool.cache_control if keep_cache else None
        out.append(
            to_tool(fn.name, fn.description, fn.parameters, tool_cache, f"tools[{i}].function")
        )
    return out


def to_tool(
    name: str,
    description: str | None,
    parameters: dict[str, Any] | None,
    cache_control: dict[str, Any] | None,
    path: str,
) -> dict[str, Any]:
    """One Anthropic tool; ``path`` is the client's path of the object holding ``name``."""
    if not name:
        raise invalid(f"{path}.name", "must not be empty")
    item: dict[str, Any] = {"name": name}
    if description:
        item["description"] = description
    item["input_schema"] = parameters if parameters is not None else dict(EMPTY_SCHEMA)
    if cache_control is not None:
        item["cache_control"] = cache_control
    return item


def to_tool_choice(
    choice: str | NamedToolChoice | None, parallel: bool | None, tool_names: list[str]
) -> dict[str, Any] | None:
    """The Anthropic ``tool_choice``, or None to send none (the default, auto)."""
    out: dict[str, Any] | None
    if choice is None:
        out = None
    elif isinstance(choice, str):
        out = mode_choice(choice, CHAT_NAMED)
    else:
        if choice.type != "function":
            raise invalid("tool_choice.type", f'must be "function"; got {choice.type!r}')
        out = named_choice(choice.function.name, tool_names, "tool_choice.function.name")
    return with_parallel(out, parallel)


def mode_choice(choice: str, named: str) -> dict[str, Any]:
    """``auto``, ``required`` or ``none``; ``named`` shows the API's form of a named choice."""
    if choice not in _CHOICES:
        raise invalid(
            "tool_choice", f'must be "auto", "required", "none" or {named}; got {choice!r}'
        )
    return {"type": _CHOICES[choice]}


def named_choice(name: str, tool_names: list[str], path: str) -> dict[str, Any]:
    if name not in tool_names:
        raise invalid(path, f"no tool named {name!r} in tools")
    return {"type": "tool", "name": name}


def with_parallel(out: dict[str, Any] | None, parallel: bool | None) -> dict[str, Any] | None:
    """``parallel_tool_calls: false`` as ``disable_parallel_tool_use`` (meaningless with none)."""
    if parallel is False and (out is None or out["type"] != "none"):
        out = {"type": "auto"} if out is None else out
        out["disable_parallel_tool_use"] = True
    return out


def forces_tool(choice: dict[str, Any] | None) -> bool:
    return choice is not None and choice["type"] in ("any", "tool")
