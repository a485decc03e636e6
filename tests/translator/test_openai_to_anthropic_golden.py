"""Golden files: one directory per behaviour of the public Chat Completions page.

``in.json`` is the OpenAI request body, ``headers.json`` (optional) the ``x-ezat-session`` and
``x-ezat-cache`` headers, ``out.json`` the Anthropic body sent upstream (without ``model``) and
``meta.json`` the rest of the translation. ``UPDATE_GOLDEN=1`` rewrites ``out.json`` and
``meta.json``; review the diff by hand, the files are the specification in executable form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ezat_translator.core.openai_to_anthropic import ChatTranslation
from support.golden import assert_golden_json

from .openai_to_anthropic_support import translate

GOLDEN = Path(__file__).parent / "golden" / "openai_to_anthropic"
CASES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())


def meta_of(t: ChatTranslation) -> dict[str, Any]:
    return {
        "model": t.model.id,
        "response_model": t.response_model,
        "stream": t.stream,
        "include_usage": t.include_usage,
        "session_key": t.session_key,
        "image_urls": msgspec.to_builtins(t.image_urls),
        "tool_turns": [[index, ids] for index, ids in t.tool_turns],
        "thinking_requested": t.thinking_requested,
        "cache_ttl": t.cache_ttl,
    }


def test_there_is_a_case_per_behaviour() -> None:
    assert len(CASES) >= 50


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_request_matches_golden(case: Path) -> None:
    headers_file = case / "headers.json"
    headers = json.loads(headers_file.read_text()) if headers_file.exists() else {}
    translation = translate(
        (case / "in.json").read_bytes(),
        session_header=headers.get("x-ezat-session"),
        cache_header=headers.get("x-ezat-cache"),
    )
    # The body must survive the encoder the lead uses, exactly.
    body = msgspec.json.decode(msgspec.json.encode(translation.body))
    assert "model" not in body
    assert_golden_json(case / "out.json", body)
    assert_golden_json(case / "meta.json", meta_of(translation))
