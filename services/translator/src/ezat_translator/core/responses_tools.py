"""Responses ``tools`` and ``tool_choice`` as Anthropic ``tools`` and ``tool_choice``
(docs/responses.md, "Tools").

- ``function`` tools are flat (``name``, ``description``, ``parameters``) and become tools as on
  the chat API. ``strict: true`` is honoured where the model can: for a model with structured
  output the tool is sent with ``strict: true``, and its ``parameters`` must then close every
  object (``"additionalProperties": false``, the rule of ``text.format``); for other models it is
  dropped. ``strict`` left out or false sends a plain tool.
- ``custom`` tools (freeform: the model writes plain text, such as the Codex CLI's
  ``apply_patch``) have no JSON schema; Anthropic tools take JSON only, so a custom tool becomes a
  tool taking one string, ``{"input": "..."}`` (``CUSTOM_SCHEMA``). Its calls and outputs come
  back in ``input`` as ``custom_tool_call`` items whose ``input`` string is that one parameter.
  A ``grammar`` format cannot be enforced: its definition is appended to the description, so the
  model knows the syntax it is asked for.
- Built-in tools (web search, file search, computer use, code interpreter, image generation,
  MCP, local shell) have no equivalent and are refused, naming ``tools[i].type``.
- ``tool_choice`` ``auto``/``required``/``none`` as on the chat API; ``{"type": "function" |
  "custom", "name"}`` forces that tool; ``parallel_tool_calls: false`` as on the chat API.
  Without tools both are ignored.
"""

from __future__ import annotations

from typing import Any

from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from ezat_common.schemas.openai_responses import CustomTool, FunctionTool, NamedTool

from .openai_output import check_closed
from .openai_request import converted
from .openai_tools import mode_choice, named_choice, to_tool, with_parallel

CUSTOM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
    "additionalProperties": False,
}
BUILT_IN = ("file_search", "code_interpreter", "image_generation", "mcp", "local_shell")
BUILT_IN_PREFIXES = ("web_search", "computer_use")
RESPONSES_NAMED = '{"type": "function", "name": ...}'


def is_built_in(kind: Any) -> bool:
    return isinstance(kind, str) and (kind in BUILT_IN or kind.startswith(BUILT_IN_PREFIXES))


def to_tools(tools: list[dict[str, Any]], model: ModelConfig) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(tools):
        path = f"tools[{i}]"
        kind = raw.get("type")
        if kind == "function":
            out.append(function_tool(converted(raw, FunctionTool, path), model, path))
        elif kind == "custom":
            out.append(custom_tool(converted(raw, CustomTool, path), model, path))
        elif is_built_in(kind):
            raise invalid(
                f"{path}.type",
                f"the built-in tool {kind} is not supported; use function or custom tools",
            )
        else:
            raise invalid(f"{path}.type", f'must be "function" or "custom"; got {kind!r}')
    return out


def function_tool(tool: FunctionTool, model: ModelConfig, path: str) -> dict[str, Any]:
    marker = tool.cache_control if model.prompt_caching else None
    item = to_tool(tool.name, tool.description, tool.parameters, marker, path)
    if tool.strict and model.structured_output:
        if tool.parameters is None:
            item["input_schema"]["additionalProperties"] = False
        check_closed(item["input_schema"], f"{path}.parameters")
        item["strict"] = True
    return item


def custom_tool(tool: CustomTool, model: ModelConfig, path: str) -> dict[str, Any]:
    description = tool.description or ""
    fmt = tool.format
    if fmt is not None and fmt.type == "grammar":
        grammar = f"The input must match this {fmt.syntax or ''} grammar:\n{fmt.definition or ''}"
        description = f"{description}\n\n{grammar}" if description else grammar
    elif fmt is not None and fmt.type != "text":
        raise invalid(f"{path}.format.type", f'must be "text" or "grammar"; got {fmt.type!r}')
    marker = tool.cache_control if model.prompt_caching else None
    return to_tool(tool.name, description, dict(CUSTOM_SCHEMA), marker, path)


def to_tool_choice(
    choice: str | dict[str, Any] | None, parallel: bool | None, tools: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The Anthropic ``tool_choice``, or None to send none (the default, auto)."""
    out: dict[str, Any] | None
    if choice is None:
        out = None
    elif isinstance(choice, str):
        out = mode_choice(choice, RESPONSES_NAMED)
    else:
        kind = choice.get("type")
        if kind in ("function", "custom"):
            named = converted(choice, NamedTool, "tool_choice")
            out = named_choice(named.name, [t["name"] for t in tools], "tool_choice.name")
        elif is_built_in(kind):
            raise invalid("tool_choice.type", f"the built-in tool {kind} is not supported")
        else:
            raise invalid("tool_choice.type", f'must be "function" or "custom"; got {kind!r}')
    return with_parallel(out, parallel)
