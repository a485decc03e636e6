"""OpenAI ``finish_reason`` of an Anthropic ``stop_reason`` (docs/api.md, "Finish reasons")."""

from __future__ import annotations

FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}


def to_finish_reason(stop_reason: str | None) -> str:
    """The mapped reason; an absent or unknown stop reason ends the choice normally (``stop``)."""
    if stop_reason is None:
        return "stop"
    return FINISH_REASONS.get(stop_reason, "stop")


# The finish reasons that end a Responses API answer early (docs/responses.md, "Status").
INCOMPLETE_REASONS: dict[str, str] = {
    "length": "max_output_tokens",
    "content_filter": "content_filter",
}


def to_incomplete_reason(stop_reason: str | None) -> str | None:
    """``incomplete_details.reason`` of a Responses answer; None when it is complete."""
    return INCOMPLETE_REASONS.get(to_finish_reason(stop_reason))
