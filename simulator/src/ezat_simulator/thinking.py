"""Extended thinking as Anthropic's Messages API checks it (pure; raises ``InvalidRequest``): the
``thinking`` object, what it forbids (a temperature other than 1, a forced tool), and the history
rule: a continued tool-calling assistant turn starts with its thinking block, signature intact.
The simulator signs its own thinking blocks (``thinking_signature``) and checks them on return.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .invalid import InvalidRequest, is_int, require

MIN_THINKING_BUDGET = 1024
FORCED_TOOL_WITH_THINKING = "Thinking may not be enabled when tool_choice forces tool use."


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


def check_thinking(req: Mapping[str, Any]) -> None:
    thinking = req.get("thinking")
    if thinking is None:
        return
    require(isinstance(thinking, Mapping), "thinking", "Input should be an object")
    kind = thinking.get("type")
    require(
        kind in ("enabled", "disabled", "adaptive"),
        "thinking.type",
        "Input should be 'enabled', 'disabled' or 'adaptive'",
    )
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        require(is_int(budget), "thinking.enabled.budget_tokens", "Field required")
        require(
            budget >= MIN_THINKING_BUDGET,
            "thinking.enabled.budget_tokens",
            f"Input should be greater than or equal to {MIN_THINKING_BUDGET}",
        )
        max_tokens = req.get("max_tokens")
        if is_int(max_tokens) and budget >= max_tokens:
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


def check_thinking_history(req: Mapping[str, Any]) -> None:
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
