"""Validation: what Anthropic's API would refuse, with the field path in the message."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_simulator.thinking import FORCED_TOOL_WITH_THINKING
from ezat_simulator.validate import InvalidRequest, validate_request

OK: dict[str, Any] = {
    "model": "m",
    "max_tokens": 10,
    "messages": [{"role": "user", "content": "hi"}],
}


def with_(**changes: Any) -> dict[str, Any]:
    body = dict(OK)
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def user(*blocks: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(blocks)}]


BAD = [
    ([1], "request body: Input should be a JSON object"),
    (with_(model=None), "model: Field required"),
    (with_(model=3), "model: Input should be a valid string"),
    (with_(max_tokens=None), "max_tokens: Field required"),
    (with_(max_tokens="5"), "max_tokens: Input should be a valid integer"),
    (with_(max_tokens=True), "max_tokens: Input should be a valid integer"),
    (with_(max_tokens=0), "max_tokens: Input should be greater than or equal to 1"),
    (with_(messages=None), "messages: Field required"),
    (with_(messages={}), "messages: Input should be a valid list"),
    (with_(messages=[]), "messages: at least one message is required"),
    (
        with_(messages=[{"role": "system", "content": "x"}]),
        "messages.0.role: Input should be 'user' or 'assistant'",
    ),
    (with_(messages=[{"role": "user"}]), "messages.0.content: Field required"),
    (
        with_(messages=[{"role": "user", "content": 5}]),
        "messages.0.content: Input should be a valid string or a list",
    ),
    (with_(messages=user({"type": "video"})), "messages.0.content.0.type: Input tag 'video' found"),
    (with_(messages=user({"type": "text"})), "messages.0.content.0.text: Field required"),
    (
        with_(messages=user({"type": "image", "source": "x"})),
        "messages.0.content.0.source: Input should be a valid dictionary",
    ),
    (
        with_(
            messages=user({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}})
        ),
        "messages.0.content.0.source.type: this deployment takes images inline only",
    ),
    (
        with_(
            messages=user(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/bmp", "data": ""},
                }
            )
        ),
        "messages.0.content.0.source.media_type: Input should be 'image/jpeg'",
    ),
    (
        with_(messages=user({"type": "tool_use", "id": "t", "name": "n"})),
        "messages.0.content.0.input: Input should be an object",
    ),
    (
        with_(
            messages=user({"type": "text", "text": "x", "cache_control": {"type": "persistent"}})
        ),
        "messages.0.content.0.cache_control.type: Input should be 'ephemeral'",
    ),
    (
        with_(
            messages=user(
                {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "2h"}}
            )
        ),
        "messages.0.content.0.cache_control.ttl",
    ),
    (with_(stream="yes"), "stream: Input should be a valid boolean"),
    (with_(system=[{"type": "image"}]), "system.0.type: Input should be 'text'"),
    (with_(tools=[{"name": "t"}]), "tools.0.input_schema: Field required"),
    (with_(tool_choice={"type": "sometimes"}), "tool_choice.type"),
    (
        with_(thinking={"type": "enabled", "budget_tokens": 100}),
        "thinking.enabled.budget_tokens: Input should be greater",
    ),
    (
        with_(thinking={"type": "enabled", "budget_tokens": 2000}),
        "`max_tokens` must be greater than `thinking.budget_tokens`.",
    ),
    (
        with_(
            thinking={"type": "adaptive"},
            tools=[{"name": "t", "input_schema": {}}],
            tool_choice={"type": "any"},
        ),
        FORCED_TOOL_WITH_THINKING,
    ),
    (with_(thinking={"type": "adaptive"}, temperature=0.5), "`temperature` may only be set to 1"),
    (with_(temperature=1.5), "temperature: Input should be between 0 and 1"),
    (with_(stop_sequences="END"), "stop_sequences"),
    (with_(user="me"), "user: Extra inputs are not permitted"),
    (
        with_(
            messages=user(
                *[{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}] * 5
            )
        ),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
]


@pytest.mark.parametrize(("body", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_refused(body: Any, message: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        validate_request(body)
    assert err.value.message.startswith(message)


GOOD = [
    OK,
    with_(stream=True, system="be brief", temperature=0.2, stop_sequences=["END"]),
    with_(
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "x"},
                    }
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        ],
        tools=[
            {
                "name": "w",
                "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            }
        ],
    ),
    with_(thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=2048),
    with_(tools=[{"name": "w", "input_schema": {}}], tool_choice={"type": "tool", "name": "w"}),
]


@pytest.mark.parametrize("body", GOOD)
def test_accepted(body: Any) -> None:
    validate_request(body)


def test_count_tokens_needs_no_max_tokens() -> None:
    validate_request(with_(max_tokens=None), count_only=True)


def _thinking_turn(first: dict) -> dict:  # type: ignore[type-arg]
    return {
        "model": "m",
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "t", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [first, {"type": "tool_use", "id": "x", "name": "t", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "x", "content": "ok"}],
            },
        ],
    }


def test_thinking_tool_turn_must_start_with_its_thinking_block() -> None:
    from ezat_simulator.thinking import thinking_signature
    from ezat_simulator.validate import InvalidRequest, validate_request

    good = {"type": "thinking", "thinking": "hmm", "signature": thinking_signature("hmm")}
    validate_request(_thinking_turn(good))
    with pytest.raises(InvalidRequest, match="Expected `thinking` or `redacted_thinking`"):
        validate_request(_thinking_turn({"type": "text", "text": "no thinking"}))
    forged = {"type": "thinking", "thinking": "hmm", "signature": "sim_sig_forged"}
    with pytest.raises(InvalidRequest, match="Invalid `signature`"):
        validate_request(_thinking_turn(forged))


# ---- role "system" messages under the betas Claude Code sends (issue 16) --------------------

CLAUDE_CODE_BETAS = ("claude-code-20250219", "mid-conversation-system-2026-04-07")
PER_TURN = ("per-turn-control-2026-07-01",)
TOOL_TURN = [
    {"role": "user", "content": "run it"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
]


def steered(*system_messages: dict[str, Any]) -> dict[str, Any]:
    return with_(messages=[*TOOL_TURN, *system_messages])


SYSTEM_GOOD = [
    (
        steered({"role": "system", "content": "the user asked to stop after this"}),
        CLAUDE_CODE_BETAS,
    ),
    (
        steered(
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "hint", "cache_control": {"type": "ephemeral"}}
                ],
                "output_config": {"effort": "low"},
                "clear_at": "next_user_message",
            }
        ),
        PER_TURN,
    ),
    # A message that only changes the effort carries no content at all.
    (steered({"role": "system", "output_config": {"effort": "high"}}), PER_TURN),
    (steered({"role": "system", "content": "x"}), ("mid-conversation-system-2027-01-01",)),
]


@pytest.mark.parametrize(("body", "betas"), SYSTEM_GOOD)
def test_system_messages_accepted_under_their_betas(
    body: dict[str, Any], betas: tuple[str, ...]
) -> None:
    validate_request(body, betas=betas)
    validate_request(body, betas=betas, count_only=True)


SYSTEM_BAD = [
    # Without the beta the API knows two roles, as before.
    (steered({"role": "system", "content": "x"}), (), "messages.3.role: Input should be 'user'"),
    (
        steered({"role": "system", "content": "x"}),
        ("context-management-2025-06-27",),
        "messages.3.role: Input should be 'user' or 'assistant'",
    ),
    (
        with_(messages=[{"role": "system", "content": "x"}, *TOOL_TURN]),
        PER_TURN,
        "messages.0.role: the first message must not be 'system'",
    ),
    (steered({"role": "system"}), PER_TURN, "messages.3.content: Field required"),
    (
        steered({"role": "system", "content": [{"type": "image", "source": {}}]}),
        PER_TURN,
        "messages.3.content.0.type: Input should be 'text'",
    ),
    (
        steered({"role": "system", "content": "x", "output_config": {"effort": "huge"}}),
        PER_TURN,
        "messages.3.output_config.effort: Input should be 'low'",
    ),
    (
        steered({"role": "system", "content": "x", "output_config": {"format": {}}}),
        PER_TURN,
        "messages.3.output_config.format: Extra inputs are not permitted",
    ),
    (
        steered({"role": "system", "content": "x", "clear_at": "later"}),
        PER_TURN,
        "messages.3.clear_at: Input should be 'next_user_message' or 'never'",
    ),
    (
        with_(messages=[{"role": "user", "content": "x", "clear_at": "never"}]),
        PER_TURN,
        "messages.0.clear_at: Extra inputs are not permitted",
    ),
]


@pytest.mark.parametrize(("body", "betas", "message"), SYSTEM_BAD, ids=[m for *_, m in SYSTEM_BAD])
def test_system_messages_refused(
    body: dict[str, Any], betas: tuple[str, ...], message: str
) -> None:
    with pytest.raises(InvalidRequest) as err:
        validate_request(body, betas=betas)
    assert err.value.message.startswith(message)
