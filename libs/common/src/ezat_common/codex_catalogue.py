"""What the Codex CLI reads about a model (docs/responses.md, "Codex CLI").

Codex asks ``GET {model_catalog_url}?client_version=…`` for ``{"models": [ModelInfo, …]}`` and
looks the configured model up by exact slug; a model it does not find there runs on its fallback
metadata, with its warning ``Model metadata for … not found``. Each model is listed under its id
and, hidden from Codex's picker, under each alias, so that whichever of them a config names is
found.

The fields are the ones Codex 0.171 requires (it refuses the whole list when one is missing),
the others left to its defaults. Behaviour stays that of its fallback metadata (its own shell
tool, no ``apply_patch`` tool, no built-in search tool) except for what the catalogue knows
better: the context window (Codex compacts the conversation before it fills), the reasoning
efforts the model accepts, whether it reads images, and the system prompt. Serving metadata
makes the gateway the author of Codex's system prompt (``base_instructions``: Codex sends it in
place of its own built-in prompt), so it is ``codex_instructions.md``, written for any model.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources import files
from typing import Any

from .config import ModelConfig

INSTRUCTIONS = files(__package__).joinpath("codex_instructions.md").read_text(encoding="utf-8")

# Codex shows these next to each effort in its picker.
EFFORTS = {
    "none": "No thinking: the fastest answers",
    "low": "Light thinking for quick answers",
    "medium": "Balances speed and depth for everyday tasks",
    "high": "Deeper thinking for complex problems",
    "xhigh": "Extra deep thinking for hard problems",
    "max": "The most thinking the model does",
}
# Codex's fallback: tool output cut at 10,000 bytes.
TRUNCATION = {"mode": "bytes", "limit": 10_000}


def codex_models(models: Iterable[ModelConfig]) -> list[dict[str, Any]]:
    """Codex's ``models`` list: one entry per model name, the id first (its picker lists the
    ids, in catalogue order), its aliases hidden."""
    entries: list[dict[str, Any]] = []
    for priority, model in enumerate(models):
        for name in (model.id, *model.aliases):
            entries.append(_entry(model, name, priority, listed=name == model.id))
    return entries


def reasoning_levels(model: ModelConfig) -> list[str]:
    """The efforts Codex may send (``reasoning.effort``) that the model accepts: ``none`` and its
    levels when it thinks (docs/api.md, "reasoning_effort"); none at all when it does not."""
    if model.thinking == "none":
        return []
    return ["none", *model.effort_levels]


def _entry(model: ModelConfig, name: str, priority: int, *, listed: bool) -> dict[str, Any]:
    return {
        "slug": name,
        "display_name": name,
        "description": (
            f"{model.id} through EZAT Router: {model.context_window:,} tokens of context, "
            f"up to {model.max_output_tokens:,} output tokens"
        ),
        "default_reasoning_level": None,  # as the fallback: no effort unless configured
        "supported_reasoning_levels": [
            {"effort": level, "description": EFFORTS[level]} for level in reasoning_levels(model)
        ],
        "shell_type": "default",
        "visibility": "list" if listed else "hide",
        "supported_in_api": True,
        "priority": priority,
        "upgrade": None,
        "base_instructions": INSTRUCTIONS,
        "supports_reasoning_summaries": False,
        "support_verbosity": False,
        "default_verbosity": None,
        "apply_patch_tool_type": None,
        "truncation_policy": TRUNCATION,
        "supports_parallel_tool_calls": True,
        "context_window": model.context_window,
        "max_context_window": model.context_window,
        "experimental_supported_tools": [],
        "input_modalities": ["text", "image"] if model.vision else ["text"],
    }
