"""Golden files: whole Responses requests and the Messages requests they become.

``in.json`` is the Responses request body, ``headers.json`` (optional) the ``x-ezat-session`` and
``x-ezat-cache`` headers, ``out.json`` the Anthropic body sent upstream (without ``model``) and
``meta.json`` the rest of the translation. Reasoning items are opened by the stand-in hook
``restore_thinking`` (one thinking block signed with the blob). ``UPDATE_GOLDEN=1`` rewrites
``out.json`` and ``meta.json``; review the diff by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ezat_translator.core.responses_to_anthropic import ResponsesTranslation

from .openai_to_anthropic_support import assert_translation_golden, case_input, translation_meta
from .responses_request_support import restore_thinking, translate

GOLDEN = Path(__file__).parent / "golden" / "responses_request"
CASES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())


def meta_of(t: ResponsesTranslation) -> dict[str, Any]:
    return {
        **translation_meta(t),
        "store": t.store,
        "include": t.include,
        "previous_response_id": t.previous_response_id,
        "custom_tools": t.custom_tools,
    }


def test_the_cases_are_there() -> None:
    names = {p.name for p in CASES}
    assert names >= {"function_tool_loop_4_turns", "custom_tool", "image_and_pdf"}
    # One case at least per input item type the translator accepts.
    assert names >= {
        "easy_message_without_type",
        "system_and_developer_messages",
        "stateless_multi_turn_output_text",
        "assistant_refusal_part_dropped",
        "function_call_and_output",
        "reasoning_item_opened",
        "custom_tool_without_grammar",
        "namespace_tools",
    }


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_request_matches_golden(case: Path) -> None:
    body, headers = case_input(case)
    translation = translate(body, **headers, open_reasoning=restore_thinking)
    assert_translation_golden(case, translation, meta_of(translation))
