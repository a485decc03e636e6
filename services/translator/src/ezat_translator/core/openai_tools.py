"""OpenAI function tools and ``tool_choice`` as Anthropic ``tools`` and ``tool_choice``.

Without tools, ``tool_choice`` and ``parallel_tool_calls`` are ignored (the page says so).
"""

from __future__ import annotations

from typing import Any

from ezat_common.errors import invalid
from ezat_common.schemas.openai import FunctionTool, NamedToolChoice

_CHOICES = {"auto": "auto", "required": "any", "none": "none"}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def to_tools(tools: list[FunctionTool], *, keep_cache: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        if tool.type != "function":
            raise invalid(
                f"tools[{i}].type", f"only function tools are supported; got {tool.type!r}"
            )
        fn = tool.function
        if not fn.name:
            raise invalid(f"tools[{i}].function.name", "must not be empty")
        item: dict[str, Any] = {"name": fn.name}
        if fn.description:
            item["description"] = fn.description
        item["input_schema"] = fn.parameters if fn.parameters is not None else dict(EMPTY_SCHEMA)
        if keep_cache and tool.cache_control is not None:
            item["cache_control"] = tool.cache_control
        out.append(item)
    return out


def to_tool_choice(
    choice: str | NamedToolChoice | None, parallel: bool | None, tool_names: list[str]
) -> dict[str, Any] | None:
    """The Anthropic ``tool_choice``, or None to send none (the default, auto)."""
    out: dict[str, Any] | None
    if choice is None:
        out = None
    elif isinstance(choice, str):
        if choice not in _CHOICES:
            raise invalid(
                "tool_choice",
                f'must be "auto", "required", "none" or {{"type": "function", "function": '
                f'{{"name": ...}}}}; got {choice!r}',
            )
        out = {"type": _CHOICES[choice]}
    else:
        if choice.type != "function":
            raise invalid("tool_choice.type", f'must be "function"; got {choice.type!r}')
        if choice.function.name not in tool_names:
            raise invalid(
                "tool_choice.function.name", f"no tool named {choice.function.name!r} in tools"
            )
        out = {"type": "tool", "name": choice.function.name}
    if parallel is False and (out is None or out["type"] != "none"):
        out = {"type": "auto"} if out is None else out
        out["disable_parallel_tool_use"] = True
    return out


def forces_tool(choice: dict[str, Any] | None) -> bool:
    return choice is not None and choice["type"] in ("any", "tool")
