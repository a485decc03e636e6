"""Golden files: one directory per behaviour of the public Chat Completions page.

``in.json`` is the OpenAI request body, ``headers.json`` (optional) the ``x-ezat-session`` and
``x-ezat-cache`` headers, ``out.json`` the Anthropic body sent upstream (without ``model``) and
``meta.json`` the rest of the translation. ``UPDATE_GOLDEN=1`` rewrites ``out.json`` and
``meta.json``; review the diff by hand, the files are the specification in executable form.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ezat_translator.core.openai_to_anthropic import ChatTranslation

from .openai_to_anthropic_support import (
    assert_translation_golden,
    case_input,
    translate,
    translation_meta,
)

GOLDEN = Path(__file__).parent / "golden" / "openai_to_anthropic"
CASES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())


def meta_of(t: ChatTranslation) -> dict[str, Any]:
    return {**translation_meta(t), "include_usage": t.include_usage}


def test_there_is_a_case_per_behaviour() -> None:
    assert len(CASES) >= 50


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_request_matches_golden(case: Path) -> None:
    body, headers = case_input(case)
    translation = translate(body, **headers)
    # The body must survive the encoder the lead uses, exactly.
    assert_translation_golden(case, translation, meta_of(translation))
