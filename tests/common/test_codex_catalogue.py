"""codex_catalogue.py: the model metadata the Codex CLI reads, from the catalogue (what the
pinned Codex does with it: tests/e2e/test_codex_cli.py)."""

from __future__ import annotations

import msgspec
from ezat_common.codex_catalogue import INSTRUCTIONS, codex_models
from support.config import SONNET, catalogue, model

SONNET_5_5 = model(
    SONNET,
    aliases=["claude-sonnet-5-5", "claude-sonnet-5.5"],
    context_window=200_000,
    max_output_tokens=64_000,
    thinking="adaptive",
    effort_levels=["low", "medium", "high", "xhigh", "max"],
)
INSTANT = model("anthropic/instant", context_window=100_000, max_output_tokens=8192, vision=False)
# The fields Codex 0.171 refuses the whole list without (each left out in turn, against the
# pinned binary): a list missing one leaves every model on its fallback metadata.
REQUIRED = {
    "slug",
    "display_name",
    "base_instructions",
    "supported_reasoning_levels",
    "shell_type",
    "visibility",
    "supported_in_api",
    "priority",
    "support_verbosity",
    "truncation_policy",
    "experimental_supported_tools",
}


def entries() -> dict[str, dict[str, object]]:
    cat = catalogue(SONNET_5_5, INSTANT)
    return {entry["slug"]: entry for entry in codex_models(cat.models)}


def test_every_name_a_config_may_use_is_a_slug_the_ids_listed_the_aliases_hidden() -> None:
    found = entries()
    # Codex looks its model up by exact slug: the id and each alias each have an entry.
    assert list(found) == [SONNET, "claude-sonnet-5-5", "claude-sonnet-5.5", "anthropic/instant"]
    assert {slug: e["visibility"] for slug, e in found.items()} == {
        SONNET: "list",
        "claude-sonnet-5-5": "hide",
        "claude-sonnet-5.5": "hide",
        "anthropic/instant": "list",
    }
    # The picker orders by priority: the catalogue's order; an alias ranks with its model.
    assert [e["priority"] for e in found.values()] == [0, 0, 0, 1]
    for entry in found.values():
        assert entry.keys() >= REQUIRED, REQUIRED - entry.keys()


def test_the_catalogue_gives_the_context_window_the_efforts_and_the_input_kinds() -> None:
    found = entries()
    sonnet, instant = found["claude-sonnet-5.5"], found["anthropic/instant"]
    assert (sonnet["context_window"], sonnet["max_context_window"]) == (200_000, 200_000)
    assert (instant["context_window"], instant["max_context_window"]) == (100_000, 100_000)
    efforts = [level["effort"] for level in sonnet["supported_reasoning_levels"]]  # type: ignore[attr-defined]
    # A thinking model: none, then its levels, each a reasoning.effort the gateway accepts.
    assert efforts == ["none", "low", "medium", "high", "xhigh", "max"]
    assert instant["supported_reasoning_levels"] == []  # it does not think: no effort to pick
    assert sonnet["input_modalities"] == ["text", "image"]
    assert instant["input_modalities"] == ["text"]  # vision = false: Codex sends no images
    assert sonnet["default_reasoning_level"] is None  # no effort unless the user sets one
    assert "64,000 output tokens" in str(sonnet["description"])


def test_the_system_prompt_is_the_gateways_own() -> None:
    # Codex sends base_instructions instead of its built-in prompt: never empty.
    assert all(e["base_instructions"] == INSTRUCTIONS for e in entries().values())
    assert INSTRUCTIONS.startswith("You are a coding agent working inside the Codex CLI")
    assert "AGENTS.md" in INSTRUCTIONS


def test_codex_list_is_still_the_openai_list() -> None:
    cat = catalogue(SONNET_5_5, INSTANT)
    plain = msgspec.json.decode(cat.openai_list())
    codex = msgspec.json.decode(cat.codex_list())
    assert "models" not in plain  # the OpenAI SDKs' answer is unchanged
    assert {k: v for k, v in codex.items() if k != "models"} == plain
    assert codex["models"] == codex_models(cat.models)
    only_instant = msgspec.json.decode(cat.codex_list({"anthropic/instant"}))
    assert [e["slug"] for e in only_instant["models"]] == ["anthropic/instant"]
