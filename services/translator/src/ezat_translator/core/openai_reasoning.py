"""``reasoning_effort`` as Anthropic ``thinking`` and ``output_config.effort`` (docs/api.md,
"reasoning_effort").

Adaptive models get ``thinking: {"type": "adaptive"}`` and an effort level; budget models get
``thinking: {"type": "enabled", "budget_tokens": N}``. ``none`` disables thinking. A level the
model lacks is refused, in both columns (``minimal`` counts as ``low``).
"""

from __future__ import annotations

from typing import Any

from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from msgspec import Struct

VALUES = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
BUDGETS = {"low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768, "max": 65536}
MIN_BUDGET = 1024


class Reasoning(Struct, frozen=True, kw_only=True):
    thinking: dict[str, Any] | None = None
    effort: str | None = None

    @property
    def requested(self) -> bool:
        return self.thinking is not None and self.thinking["type"] in ("adaptive", "enabled")


def to_reasoning(
    value: str | None,
    model: ModelConfig,
    *,
    max_tokens: int,
    forced_tool: bool,
    param: str = "reasoning_effort",
    limit_param: str = "max_completion_tokens",
) -> Reasoning:
    """Thinking and effort for ``value``; nothing when it isn't sent. ``param`` and
    ``limit_param`` are the client's names of the effort and the output limit, named in 400s.

    The value and the model's levels are checked even when a forced tool choice then drops the
    thinking, so that a request is refused or accepted the same way whatever its tools.
    """
    if value is None:
        return Reasoning()
    if value not in VALUES:
        raise invalid(param, f"must be one of {', '.join(VALUES)}; got {value!r}")
    if value == "none":
        # A model without thinking has nothing to disable: its default is already no thinking.
        return Reasoning() if model.thinking == "none" else Reasoning(thinking={"type": "disabled"})
    if model.thinking == "none":
        raise invalid(param, f"`{model.id}` does not think; send none or leave the field out")
    level = "low" if value == "minimal" else value
    if level not in model.effort_levels:
        levels = ", ".join(["none", *model.effort_levels])
        raise invalid(param, f"`{model.id}` has no {level} level; use one of {levels}")
    if forced_tool:
        return Reasoning()
    if model.thinking == "adaptive":
        return Reasoning(thinking={"type": "adaptive"}, effort=level)
    budget = min(BUDGETS[level], max_tokens - 1)
    if budget < MIN_BUDGET:
        raise invalid(
            limit_param,
            f"must be above {MIN_BUDGET} to think with {param} {value} "
            f"(the thinking budget is at least {MIN_BUDGET} tokens and below the output limit); "
            f"raise it or send {param} none",
        )
    return Reasoning(thinking={"type": "enabled", "budget_tokens": budget})
