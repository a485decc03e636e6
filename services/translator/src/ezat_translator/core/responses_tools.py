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
- ``namespace`` tools (a group of function and custom tools, as the Codex CLI sends its
  ``multi_agent_v1`` tools) are flattened: each inner tool becomes a tool named
  ``{namespace}__{name}`` (Anthropic names have no namespace), its description prefixed with the
  namespace's. ``namespaced`` maps the flat names back: a call comes out with ``name`` and
  ``namespace`` as the client declared them, and a call sent back with its ``namespace`` is
  matched to the flat name again.
- ``web_search`` and ``web_search_preview`` become Anthropic's web search server tool
  (web_search.py); at most one of them.
- The other built-in tools (file search, computer use, code interpreter, image generation, MCP,
  local shell) have no equivalent and are refused, naming ``tools[i].type``.
- ``tool_choice`` ``auto``/``required``/``none`` as on the chat API; ``{"type": "function" |
  "custom", "name"}`` forces that tool, ``{"type": "web_search_preview"}`` (or ``web_search``)
  the web search; ``parallel_tool_calls: false`` as on the chat API. Without tools both are
  ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from ezat_common.schemas.openai_responses import CustomTool, FunctionTool, NamedTool, NamespaceTool
from ezat_common.web_search_types import OPENAI_SEARCH_TYPES

from .openai_output import check_closed
from .openai_request import converted
from .openai_tools import mode_choice, named_choice, to_tool, with_parallel
from .web_search import TOOL_NAME, responses_tool

CUSTOM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
    "additionalProperties": False,
}
BUILT_IN = ("file_search", "code_interpreter", "image_generation", "mcp", "local_shell")
BUILT_IN_PREFIXES = ("computer_use",)
RESPONSES_NAMED = '{"type": "function", "name": ...}'
NAMESPACE_SEPARATOR = "__"


def flat_name(namespace: str | None, name: str) -> str:
    """The Anthropic tool name of ``name`` inside ``namespace`` (``name`` itself outside one)."""
    return name if not namespace else f"{namespace}{NAMESPACE_SEPARATOR}{name}"


def _inner_tools(tools: list[dict[str, Any]] | None) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(namespace, name, tool) for each named tool inside a ``namespace`` tool."""
    for raw in tools or ():
        ns, inner = raw.get("name"), raw.get("tools")
        if raw.get("type") == "namespace" and isinstance(ns, str) and isinstance(inner, list):
            for tool in inner:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    yield ns, tool["name"], tool


def custom_tool_names(tools: list[dict[str, Any]] | None) -> list[str]:
    """The (flat) names of the freeform tools, namespaced ones included."""
    names = [t["name"] for t in tools or () if t.get("type") == "custom"]
    names += [
        flat_name(ns, name) for ns, name, t in _inner_tools(tools) if t.get("type") == "custom"
    ]
    return names


def namespaced(tools: list[dict[str, Any]] | None) -> dict[str, tuple[str, str]]:
    """Flat tool name -> (namespace, name), for the tools of every ``namespace`` tool."""
    return {flat_name(ns, name): (ns, name) for ns, name, _ in _inner_tools(tools)}


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
        elif kind == "namespace":
            out.extend(namespace_tools(converted(raw, NamespaceTool, path), model, path))
        elif kind in OPENAI_SEARCH_TYPES:
            if any(t.get("name") == TOOL_NAME for t in out):
                raise invalid(f"{path}.type", "web search is already in tools; send it once")
            out.append(responses_tool(raw, path))
        elif is_built_in(kind):
            raise invalid(
                f"{path}.type",
                f"the built-in tool {kind} is not supported; use function or custom tools",
            )
        else:
            raise invalid(
                f"{path}.type",
                'must be "function", "custom", "namespace", "web_search" or '
                f'"web_search_preview"; got {kind!r}',
            )
    return out


def namespace_tools(ns: NamespaceTool, model: ModelConfig, path: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for j, raw in enumerate(ns.tools):
        inner = f"{path}.tools[{j}]"
        kind = raw.get("type")
        tool: FunctionTool | CustomTool
        if kind == "function":
            tool = converted(raw, FunctionTool, inner)
            item = function_tool(tool, model, inner)
        elif kind == "custom":
            tool = converted(raw, CustomTool, inner)
            item = custom_tool(tool, model, inner)
        else:
            raise invalid(f"{inner}.type", f'must be "function" or "custom"; got {kind!r}')
        item["name"] = flat = flat_name(ns.name, tool.name)
        if len(flat) > 64:
            raise invalid(
                f"{inner}.name",
                f"{ns.name}{NAMESPACE_SEPARATOR}{tool.name} is longer than the 64 characters a "
                "tool name may have here; use shorter namespace or tool names",
            )
        if ns.description:
            description = item.get("description")
            item["description"] = (
                f"{ns.description}\n\n{description}" if description else ns.description
            )
        out.append(item)
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
        elif kind in OPENAI_SEARCH_TYPES:
            out = named_choice(TOOL_NAME, [t["name"] for t in tools], "tool_choice.type")
        elif is_built_in(kind):
            raise invalid("tool_choice.type", f"the built-in tool {kind} is not supported")
        else:
            raise invalid("tool_choice.type", f'must be "function" or "custom"; got {kind!r}')
    return with_parallel(out, parallel)
