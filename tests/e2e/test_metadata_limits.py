"""``metadata`` within the official APIs' own limits, through the whole stack with the official
SDKs (docs/api.md, "Metadata"). The Responses API repeats ``metadata`` in its response object:
unbounded, a large request made an answer as large, held at the edge for a client that does not
read it (docs/reliability.md, "A client that does not read its answer")."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from .conftest import Gateway

MODEL = "claude-sonnet-5-5"


async def _responses_refusal(gateway: Gateway, metadata: dict[str, str]) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as err:
        await gateway.openai().responses.create(
            model=MODEL, input="hi", max_output_tokens=16, store=False, metadata=metadata
        )
    assert err.value.status_code == 400
    body: dict[str, Any] = err.value.body  # type: ignore[assignment]
    return body


async def test_responses_metadata_at_openais_limits_is_echoed(gateway: Gateway) -> None:
    metadata = {f"k{i:02d}" + "x" * 61: "v" * 512 for i in range(16)}
    resp = await gateway.openai().responses.create(
        model=MODEL, input="hi", max_output_tokens=16, store=False, metadata=metadata
    )
    assert resp.metadata == metadata


async def test_responses_metadata_past_openais_limits_is_a_400_naming_it(gateway: Gateway) -> None:
    body = await _responses_refusal(gateway, {f"k{i}": "v" for i in range(17)})
    assert body["param"] == "metadata"
    assert body["message"].startswith("metadata: at most 16 key-value pairs")

    body = await _responses_refusal(gateway, {"k" * 65: "v"})
    assert body["param"] == "metadata"
    assert body["message"].startswith("metadata: a key is longer than 64 characters")

    # The echo that pinned memory: one value of megabytes.
    body = await _responses_refusal(gateway, {"note": "v" * 4_000_000})
    assert body["param"] == "metadata.note"
    assert body["message"].startswith("metadata.note: is longer than 512 characters")


async def _messages_refusal(gateway: Gateway, metadata: Any) -> dict[str, Any]:
    with pytest.raises(anthropic.BadRequestError) as err:
        await gateway.anthropic().messages.create(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
            metadata=metadata,
        )
    assert err.value.status_code == 400
    body: dict[str, Any] = err.value.body  # type: ignore[assignment]
    error: dict[str, Any] = body["error"]
    assert error["type"] == "invalid_request_error"
    return error


async def test_messages_metadata_user_id_within_256_characters_is_served(
    gateway: Gateway,
) -> None:
    msg = await gateway.anthropic().messages.create(
        model=MODEL,
        max_tokens=16,
        messages=[{"role": "user", "content": "hi"}],
        metadata={"user_id": "u" * 256},
    )
    assert msg.stop_reason is not None


async def test_messages_metadata_as_the_anthropic_api_is_a_400_naming_it(
    gateway: Gateway,
) -> None:
    error = await _messages_refusal(gateway, {"user_id": "u" * 257})
    assert error["message"].startswith("metadata.user_id: is longer than 256 characters")
    error = await _messages_refusal(gateway, {"user_id": "u", "note": "x" * 100_000})
    assert error["message"].startswith("metadata.note: Extra inputs are not permitted")
    error = await _messages_refusal(gateway, {"user_id": 7})
    assert error["message"] == "metadata.user_id: must be a string"
