"""Request validation as Anthropic's Messages API does it (pure; raises ``InvalidRequest``).

Messages name the offending field by its dotted path, the way the real API does:
``messages.0.content.1.type: Input tag 'video' found using 'type' does not match any of the
expected tags: ...``. The gateway passes most fields through unchanged and relies on the
deployment to refuse bad ones, so the simulator refuses what the real API refuses, and accepts
what it accepts under the betas real clients send: with a mid-conversation-system beta
(Claude Code sends ``mid-conversation-system-2026-04-07`` and, for per-turn effort,
``per-turn-control-2026-07-01``) a message may have ``role: "system"``, carrying text and its own
``output_config`` / ``clear_at`` (simulator/README.md, "Validation").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from .websearch import SEARCH_TYPES, check_tool

BLOCK_TYPES = (
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    # a web search's blocks, as a client sends its earlier answers back (websearch.py)
    "server_tool_use",
    "web_search_tool_result",
)
_TAGS = ", ".join(f"'{t}'" for t in BLOCK_TYPES)
# Top-level fields the Messages API knows; anything else is "Extra inputs are not permitted".
KNOWN_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "stream",
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "metadata",
        "output_config",
        "output_format",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
        "inference_geo",
    }
)
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_BREAKPOINTS = 4
MIN_THINKING_BUDGET = 1024
# Betas under which the API takes ``role: "system"`` messages inside ``messages``, by prefix (the
# date suffix changes as a beta is revised). Claude Code sends the first two together; the
# Python SDK's BetaSystemMessageParam documents the per-message output_config and clear_at.
SYSTEM_MESSAGE_BETAS = (
    "mid-conversation-system-",
    "per-turn-control-",
    "mid-conversation-output-config-",
    "mid-conversation-system-clear-at-",
)
EFFORTS = ("low", "medium", "high", "xhigh", "max")
CLEAR_AT = ("next_user_message", "never")
# Fields only a system message may carry ("Only permitted on role: system messages").
SYSTEM_ONLY_FIELDS = ("output_config", "clear_at")
FORCED_TOOL_WITH_THINKING = "Thinking may not be enabled when tool_choice forces tool use."


class InvalidRequest(Exception):
    """A 400 ``invalid_request_error`` whose message names the field."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _require(cond: bool, path: str, problem: str) -> None:
    if not cond:
        raise InvalidRequest(f"{path}: {problem}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# The one field each block type cannot do without: (name, JSON type, how to say it).
_REQUIRED_FIELD: dict[str, tuple[str, type, str]] = {
    "text": ("text", str, "a valid string"),
    "thinking": ("thinking", str, "a valid string"),
    "redacted_thinking": ("data", str, "a valid string"),
    "tool_result": ("tool_use_id", str, "a valid string"),
    "web_search_tool_result": ("tool_use_id", str, "a valid string"),
    "image": ("source", dict, "a valid dictionary"),
    "document": ("source", dict, "a valid dictionary"),
}


def _check_cache_control(block: Mapping[str, Any], path: str, counter: list[int]) -> None:
    marker = block.get("cache_control")
    if marker is None:
        return
    _require(isinstance(marker, Mapping), f"{path}.cache_control", "Input should be an object")
    _require(
        marker.get("type") == "ephemeral",
        f"{path}.cache_control.type",
        "Input should be 'ephemeral'",
    )
    _require(
        marker.get("ttl", "5m") in ("5m", "1h"),
        f"{path}.cache_control.ttl",
        "Input should be '5m' or '1h'",
    )
    counter[0] += 1


def _check_image_source(source: Mapping[str, Any], path: str) -> None:
    # The deployments behind the gateway take images inline only (docs/api.md, "Messages API"):
    # URL images must have been downloaded and inlined by the gateway before they get here.
    _require(
        source.get("type") == "base64",
        f"{path}.type",
        "this deployment takes images inline only: expected 'base64'",
    )
    _require(
        source.get("media_type") in IMAGE_TYPES,
        f"{path}.media_type",
        "Input should be " + ", ".join(f"'{t}'" for t in IMAGE_TYPES),
    )
    _require(isinstance(source.get("data"), str), f"{path}.data", "Field required")


def _check_block(block: Any, path: str, counter: list[int]) -> None:
    _require(isinstance(block, Mapping), path, "Input should be a valid dictionary")
    kind = block.get("type")
    _require(
        kind in BLOCK_TYPES,
        f"{path}.type",
        f"Input tag '{kind}' found using 'type' does not match any of the expected tags: {_TAGS}",
    )
    required = _REQUIRED_FIELD.get(kind)
    if required is not None:
        field, cls, what = required
        _require(field in block, f"{path}.{field}", "Field required")
        _require(isinstance(block[field], cls), f"{path}.{field}", f"Input should be {what}")
    if kind == "image":
        _check_image_source(block["source"], f"{path}.source")
    if kind in ("tool_use", "server_tool_use"):
        for field in ("id", "name"):
            _require(isinstance(block.get(field), str), f"{path}.{field}", "Field required")
        _require(
            isinstance(block.get("input"), Mapping), f"{path}.input", "Input should be an object"
        )
    _check_cache_control(block, path, counter)


def betas_of(header: str | None) -> tuple[str, ...]:
    """The values of an ``anthropic-beta`` header (comma-separated, blanks ignored)."""
    return tuple(b.strip() for b in (header or "").split(",") if b.strip())


def system_messages_allowed(betas: Iterable[str]) -> bool:
    """Whether the ``anthropic-beta`` values sent let ``messages`` hold ``role: "system"``."""
    return any(beta.startswith(SYSTEM_MESSAGE_BETAS) for beta in betas)


def _check_system_message(message: Mapping[str, Any], path: str, counter: list[int]) -> None:
    """A mid-conversation system message: text only, never first, its own output_config."""
    _require(path != "messages.0", f"{path}.role", "the first message must not be 'system'")
    config = message.get("output_config")
    if config is not None:
        _require(isinstance(config, Mapping), f"{path}.output_config", "Input should be an object")
        for name in config:
            _require(
                name == "effort", f"{path}.output_config.{name}", "Extra inputs are not permitted"
            )
        effort = config.get("effort")
        _require(
            effort is None or effort in EFFORTS,
            f"{path}.output_config.effort",
            "Input should be " + ", ".join(f"'{e}'" for e in EFFORTS),
        )
    clear_at = message.get("clear_at")
    _require(
        clear_at is None or clear_at in CLEAR_AT,
        f"{path}.clear_at",
        "Input should be 'next_user_message' or 'never'",
    )
    if "content" not in message:
        _require(config is not None, f"{path}.content", "Field required")
        return
    content = message["content"]
    if isinstance(content, str):
        return
    _require(isinstance(content, list), f"{path}.content", "Input should be a valid list")
    for j, block in enumerate(content):
        _require(
            isinstance(block, Mapping) and block.get("type") == "text",
            f"{path}.content.{j}.type",
            "Input should be 'text'",
        )
        _check_block(block, f"{path}.content.{j}", counter)


def _check_messages(messages: Any, counter: list[int], system_ok: bool) -> None:
    _require(messages is not None, "messages", "Field required")
    _require(isinstance(messages, list), "messages", "Input should be a valid list")
    _require(len(messages) > 0, "messages", "at least one message is required")
    roles = ("user", "assistant", "system") if system_ok else ("user", "assistant")
    for i, message in enumerate(messages):
        path = f"messages.{i}"
        _require(isinstance(message, Mapping), path, "Input should be a valid dictionary")
        _require(
            message.get("role") in roles,
            f"{path}.role",
            "Input should be " + ", ".join(f"'{r}'" for r in roles[:-1]) + f" or '{roles[-1]}'",
        )
        if message["role"] == "system":
            _check_system_message(message, path, counter)
            continue
        for name in SYSTEM_ONLY_FIELDS:
            _require(name not in message, f"{path}.{name}", "Extra inputs are not permitted")
        _require("content" in message, f"{path}.content", "Field required")
        content = message["content"]
        if isinstance(content, str):
            continue
        _require(
            isinstance(content, list),
            f"{path}.content",
            "Input should be a valid string or a list of content blocks",
        )
        for j, block in enumerate(content):
            _check_block(block, f"{path}.content.{j}", counter)


def _check_system(system: Any, counter: list[int]) -> None:
    if system is None or isinstance(system, str):
        return
    _require(isinstance(system, list), "system", "Input should be a valid string or list")
    for i, block in enumerate(system):
        path = f"system.{i}"
        _require(
            isinstance(block, Mapping) and block.get("type") == "text",
            f"{path}.type",
            "Input should be 'text'",
        )
        _require(isinstance(block.get("text"), str), f"{path}.text", "Field required")
        _check_cache_control(block, path, counter)


def _check_tools(tools: Any, counter: list[int]) -> None:
    if tools is None:
        return
    _require(isinstance(tools, list), "tools", "Input should be a valid list")
    for i, tool in enumerate(tools):
        path = f"tools.{i}"
        _require(isinstance(tool, Mapping), path, "Input should be a valid dictionary")
        _require(isinstance(tool.get("name"), str), f"{path}.name", "Field required")
        if tool.get("type", "custom") == "custom":
            _require(
                isinstance(tool.get("input_schema"), Mapping),
                f"{path}.input_schema",
                "Field required",
            )
        elif tool.get("type") in SEARCH_TYPES:
            problem = check_tool(tool, path)
            if problem is not None:
                raise InvalidRequest(problem)
        _check_cache_control(tool, path, counter)


def forced_tool(req: Mapping[str, Any]) -> str | None:
    """The tool that ``tool_choice`` forces (``any`` means the first), or None."""
    choice = req.get("tool_choice")
    tools = req.get("tools") or []
    if not isinstance(choice, Mapping) or not tools:
        return None
    if choice.get("type") == "any":
        return str(tools[0]["name"])
    if choice.get("type") == "tool":
        return str(choice.get("name"))
    return None


def thinking_enabled(req: Mapping[str, Any]) -> bool:
    thinking = req.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


def _check_tool_choice(choice: Any) -> None:
    if choice is None:
        return
    _require(isinstance(choice, Mapping), "tool_choice", "Input should be an object")
    kind = choice.get("type")
    _require(
        kind in ("auto", "any", "tool", "none"),
        "tool_choice.type",
        "Input should be 'auto', 'any', 'tool' or 'none'",
    )
    if kind == "tool":
        _require(isinstance(choice.get("name"), str), "tool_choice.name", "Field required")


def _check_thinking(req: Mapping[str, Any]) -> None:
    thinking = req.get("thinking")
    if thinking is None:
        return
    _require(isinstance(thinking, Mapping), "thinking", "Input should be an object")
    kind = thinking.get("type")
    _require(
        kind in ("enabled", "disabled", "adaptive"),
        "thinking.type",
        "Input should be 'enabled', 'disabled' or 'adaptive'",
    )
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        _require(_is_int(budget), "thinking.enabled.budget_tokens", "Field required")
        _require(
            budget >= MIN_THINKING_BUDGET,
            "thinking.enabled.budget_tokens",
            f"Input should be greater than or equal to {MIN_THINKING_BUDGET}",
        )
        max_tokens = req.get("max_tokens")
        if _is_int(max_tokens) and budget >= max_tokens:
            raise InvalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`.")
    if kind != "disabled":
        temperature = req.get("temperature")
        if temperature is not None and temperature != 1:
            raise InvalidRequest(
                "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode."
            )
        if forced_tool(req) is not None:
            raise InvalidRequest(FORCED_TOOL_WITH_THINKING)


def thinking_signature(text: str) -> str:
    """The signature the simulator puts on its thinking blocks (and checks when they return)."""
    return "sim_sig_" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _check_thinking_history(req: Mapping[str, Any]) -> None:
    """As the real API: with thinking on, the assistant turn that called tools and is being
    continued must start with its thinking block, returned unchanged (signature checked)."""
    if not thinking_enabled(req):
        return
    messages = req["messages"]
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), None
    )
    if last is None or not isinstance(messages[last]["content"], list):
        return
    content = messages[last]["content"]
    if not any(b.get("type") == "tool_use" for b in content):
        return
    first = content[0] if content else {}
    if first.get("type") not in ("thinking", "redacted_thinking"):
        raise InvalidRequest(
            f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, "
            f"but found `{first.get('type')}`. When `thinking` is enabled, a final `assistant` "
            "message must start with a thinking block."
        )
    for j, block in enumerate(content):
        if block.get("type") == "thinking" and block.get("signature") != thinking_signature(
            block.get("thinking", "")
        ):
            raise InvalidRequest(
                f"messages.{last}.content.{j}: Invalid `signature` in `thinking` block"
            )


def _check_sampling(req: Mapping[str, Any]) -> None:
    for name, top in (("temperature", 1.0), ("top_p", 1.0)):
        value = req.get(name)
        if value is None:
            continue
        _require(_is_number(value), name, "Input should be a valid number")
        _require(0 <= value <= top, name, f"Input should be between 0 and {top:g}")
    stops = req.get("stop_sequences")
    if stops is not None:
        _require(
            isinstance(stops, list) and all(isinstance(s, str) for s in stops),
            "stop_sequences",
            "Input should be a valid list of strings",
        )


def validate_request(body: Any, *, count_only: bool = False, betas: Iterable[str] = ()) -> None:
    """Raise ``InvalidRequest`` for anything Anthropic's API would refuse with a 400 (``betas``:
    the request's ``anthropic-beta`` values)."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("request body: Input should be a JSON object")
    for name in body:
        if name not in KNOWN_FIELDS:
            raise InvalidRequest(f"{name}: Extra inputs are not permitted")
    _require("model" in body, "model", "Field required")
    model = body["model"]
    _require(isinstance(model, str) and bool(model), "model", "Input should be a valid string")
    if not count_only:
        _require("max_tokens" in body, "max_tokens", "Field required")
        max_tokens = body["max_tokens"]
        _require(_is_int(max_tokens), "max_tokens", "Input should be a valid integer")
        _require(max_tokens >= 1, "max_tokens", "Input should be greater than or equal to 1")
        stream = body.get("stream")
        _require(
            stream is None or isinstance(stream, bool), "stream", "Input should be a valid boolean"
        )
    counter = [0]
    _check_messages(body.get("messages"), counter, system_messages_allowed(betas))
    _check_system(body.get("system"), counter)
    _check_tools(body.get("tools"), counter)
    _check_tool_choice(body.get("tool_choice"))
    _check_thinking(body)
    if not count_only:
        _check_thinking_history(body)
    _check_sampling(body)
    if counter[0] > MAX_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {counter[0]}."
        )
