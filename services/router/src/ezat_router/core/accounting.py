"""What a request consumed: token counts from the upstream's usage, estimates from its text.

Exact counts come from ``message_start.message.usage`` and ``message_delta.usage`` (a later
non-null value wins, so a cumulative ``message_delta`` corrects ``message_start``). When the
final output count never arrived (the client closed the stream early), output is estimated
from the characters generated so far (``ezat_common.tokens``), counting text, thinking and
tool-input JSON.

Server-tool requests (``usage.server_tool_use``: web searches, web fetches) are the upstream's
own counts too, read like the token counts (a later non-null value wins; never estimated); a
stream cut before its ``message_delta`` keeps what ``message_start`` said (docs/billing.md,
"Server tools").

Input is only ever the upstream's own count. A request cut before ``message_start`` (or before a
non-streamed response) arrived has no reported input: it is recorded with 0 input tokens,
``estimated``. The raw body is no measure of input tokens (base64 images and documents are
megabytes of bytes for a few thousand tokens), and the router cannot cheaply count its text, so
a request abandoned before the model started is free.
"""

from __future__ import annotations

from typing import Any

from ezat_common.envelopes import UsageRecord, UsageStatus
from ezat_common.schemas.anthropic import (
    AnyEvent,
    ContentBlockDelta,
    ContentBlockStart,
    InputJsonDelta,
    MessageDelta,
    MessageStart,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    Usage,
)
from ezat_common.tokens import reasoning_tokens, text_tokens
from msgspec import structs


class UsageAccumulator:
    """Feed it every decoded event (or a whole response's usage); it builds the UsageRecord."""

    __slots__ = (
        "cache_read",
        "cache_write_1h",
        "cache_write_5m",
        "cache_write_total",
        "input_tokens",
        "output_final",
        "output_start",
        "reasoning",
        "stop_reason",
        "text_chars",
        "thinking_chars",
        "tool_chars",
        "web_fetch",
        "web_search",
    )

    def __init__(self) -> None:
        self.input_tokens: int | None = None
        self.cache_read: int | None = None
        self.cache_write_total: int | None = None
        self.cache_write_5m: int | None = None
        self.cache_write_1h: int | None = None
        # message_start's output count is a placeholder (usually 1); only message_delta's is final.
        self.output_start: int | None = None
        self.output_final: int | None = None
        self.reasoning: int | None = None
        # Why generation stopped (message_delta, or a body's stop_reason): a trace attribute.
        self.stop_reason: str | None = None
        self.text_chars = 0
        self.thinking_chars = 0
        self.tool_chars = 0
        self.web_search: int | None = None
        self.web_fetch: int | None = None

    def feed(self, event: AnyEvent) -> None:
        if isinstance(event, ContentBlockDelta):
            delta = event.delta
            if isinstance(delta, TextDelta):
                self.text_chars += len(delta.text)
            elif isinstance(delta, ThinkingDelta):
                self.thinking_chars += len(delta.thinking)
            elif isinstance(delta, InputJsonDelta):
                self.tool_chars += len(delta.partial_json)
        elif isinstance(event, MessageStart):
            self.feed_usage(event.message.usage, final=False)
        elif isinstance(event, MessageDelta):
            self.feed_usage(event.usage, final=True)
            self.stop_reason = event.delta.stop_reason
        elif isinstance(event, ContentBlockStart):
            block = event.content_block
            if isinstance(block, TextBlock):
                self.text_chars += len(block.text)
            elif isinstance(block, ThinkingBlock):
                self.thinking_chars += len(block.thinking)

    def feed_usage(self, usage: Usage, *, final: bool) -> None:
        """Merge one usage object; ``final`` marks an authoritative output count."""
        if usage.input_tokens is not None:
            self.input_tokens = usage.input_tokens
        if usage.cache_read_input_tokens is not None:
            self.cache_read = usage.cache_read_input_tokens
        if usage.cache_creation_input_tokens is not None:
            self.cache_write_total = usage.cache_creation_input_tokens
        if usage.cache_creation is not None:
            self.cache_write_5m = usage.cache_creation.ephemeral_5m_input_tokens
            self.cache_write_1h = usage.cache_creation.ephemeral_1h_input_tokens
        if usage.reasoning_tokens is not None:
            self.reasoning = usage.reasoning_tokens
        tools = usage.server_tool_use
        if tools is not None:
            if tools.web_search_requests is not None:
                self.web_search = tools.web_search_requests
            if tools.web_fetch_requests is not None:
                self.web_fetch = tools.web_fetch_requests
        if usage.output_tokens is not None:
            if final:
                self.output_final = usage.output_tokens
            else:
                self.output_start = usage.output_tokens

    def feed_response(self, usage: Usage, content: list[Any], stop_reason: object) -> None:
        """A non-streamed response, decoded once: its usage (final), its content blocks and its
        ``stop_reason`` (what the stream's message_delta says)."""
        self.feed_usage(usage, final=True)
        self.feed_content(content)
        if isinstance(stop_reason, str):
            self.stop_reason = stop_reason

    def feed_content(self, content: list[Any]) -> None:
        """Count the characters of a non-streamed response's content blocks (decoded JSON)."""
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                self.text_chars += _len(block.get("text"))
            elif kind == "thinking":
                self.thinking_chars += _len(block.get("thinking"))

    @property
    def started(self) -> bool:
        """The upstream reported its input usage (message_start or a response arrived)."""
        return self.input_tokens is not None

    def estimated_output(self) -> int:
        return text_tokens(self.text_chars + self.thinking_chars + self.tool_chars)

    def cache_writes(self) -> tuple[int, int]:
        """(5-minute, 1-hour) cache writes; without a breakdown everything is 5-minute."""
        one_hour = self.cache_write_1h or 0
        if self.cache_write_total is not None:
            return max(self.cache_write_total - one_hour, 0), one_hour
        return self.cache_write_5m or 0, one_hour

    def record(
        self, base: UsageRecord, status: UsageStatus, error_type: str | None = None
    ) -> UsageRecord:
        """``base`` (ids, deployment, timings) completed with the token counts.

        Input never reported (the request was cut before message_start or the response) is 0:
        the deployment reported nothing and the request body is no measure of its tokens.
        Output never finalised is the larger of the estimate from the generated characters and
        what message_start said. Either case sets ``estimated``.
        """
        estimated = False
        input_tokens = self.input_tokens
        if input_tokens is None:
            input_tokens = 0
            estimated = True
        output = self.output_final
        if output is None:
            output = max(self.estimated_output(), self.output_start or 0)
            estimated = True
        reasoning = self.reasoning
        if reasoning is None:
            reasoning = reasoning_tokens(self.thinking_chars, output)
        write_5m, write_1h = self.cache_writes()
        return structs.replace(
            base,
            status=status,
            input_tokens=input_tokens,
            cache_read_tokens=self.cache_read or 0,
            cache_write_5m_tokens=write_5m,
            cache_write_1h_tokens=write_1h,
            output_tokens=output,
            reasoning_tokens=reasoning,
            estimated=estimated,
            error_type=error_type,
            web_search_requests=self.web_search or 0,
            web_fetch_requests=self.web_fetch or 0,
        )


def _len(value: object) -> int:
    return len(value) if isinstance(value, str) else 0
