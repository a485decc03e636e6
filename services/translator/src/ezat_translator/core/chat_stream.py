"""An Anthropic Messages event stream as OpenAI ``chat.completion.chunk`` SSE (docs/api.md,
"Streaming").

The sequence the client sees (seed page, Streaming):

1. ``message_start`` → the first chunk, ``delta: {"role": "assistant", "content": ""}``;
2. ``text_delta`` → ``delta.content``; a ``tool_use`` block start → ``delta.tool_calls`` with the
   ``index`` (counting tool_use blocks from 0), ``id``, ``type`` and ``function.name``, then each
   ``input_json_delta`` → a ``function.arguments`` piece;
3. ``message_delta`` → the last choice chunk: empty delta and the ``finish_reason``;
4. ``message_stop`` → with ``include_usage`` the ``choices: []`` usage chunk, then ``data: [DONE]``.

The usage chunk waits for ``message_stop`` because the router releases that event only after
billing acknowledged the record: if billing fails instead, the client gets the error and
``[DONE]`` without a usage chunk, as the seed page promises for failed (unbilled) requests.

A text block's web search citations are ``url_citation`` annotations spanning that block's place
in the content; all of them come in one chunk (``delta.annotations``) before the finish chunk,
because the openai SDK's stream helper appends a list it gets whole but cannot merge two pieces
of one without an ``index``. Thinking produces no chunk; its blocks are kept (``kept_thinking``)
when the turn called tools.
Pings produce nothing (the edge writes its own ``: ping`` comments). Events that do not decode
(an unknown type, a block or delta type not declared) are counted in ``ignored_events`` and
skipped. Chunks are spliced from byte pieces encoded once per stream; per event only the
variable part (text, arguments) is encoded.
"""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.envelopes import ReplyError
from ezat_common.errors import OPENAI, STATUS_OF_TYPE, type_for_status
from ezat_common.schemas.anthropic import (
    CitationsDelta,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Error,
    InputJsonDelta,
    MessageDelta,
    MessageStart,
    MessageStop,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from ezat_common.schemas.openai import CompletionUsage

from ezat_translator.core.anthropic_answer import AnthropicEvents, ThinkingPieces, thinking_dict
from ezat_translator.core.anthropic_to_openai import ThinkingKept
from ezat_translator.core.chat_usage import to_chat_usage
from ezat_translator.core.finish import to_finish_reason
from ezat_translator.core.token_counts import TokenCounts
from ezat_translator.core.web_search import chat_annotation, url_citations

_encode = msgspec.json.Encoder().encode

DONE = b"data: [DONE]\n\n"
_OPEN_CHOICE = b'{"index":0,"delta":'
_CLOSE_CHOICE = b',"logprobs":null,"finish_reason":null}'


class ChatStream:
    """One streaming request: ``feed`` Anthropic SSE bytes, write what it returns."""

    __slots__ = (
        "_args_open",
        "_cited",
        "_counts",
        "_events",
        "_finish_reason",
        "_head",
        "_include_usage",
        "_length",
        "_notes",
        "_role_chunk",
        "_started",
        "_tail",
        "_text_close",
        "_text_open",
        "_thinking",
        "_thinking_chars",
        "_tool_call_ids",
        "_tool_index",
        "done",
    )

    def __init__(
        self, *, request_id: str, response_model: str, created: int, include_usage: bool
    ) -> None:
        self._head = (
            b'data: {"id":'
            + _encode(f"chatcmpl-{request_id}")
            + b',"object":"chat.completion.chunk","created":'
            + str(created).encode()
            + b',"model":'
            + _encode(response_model)
            + b',"choices":['
        )
        # With include_usage every chunk but the last carries "usage": null, as OpenAI sends it.
        self._tail = b'],"usage":null}\n\n' if include_usage else b"]}\n\n"
        self._text_open = self._head + _OPEN_CHOICE + b'{"content":'
        self._text_close = b"}" + _CLOSE_CHOICE + self._tail
        self._args_open = self._head + _OPEN_CHOICE + b'{"tool_calls":[{"index":'
        self._role_chunk = (
            self._head
            + _OPEN_CHOICE
            + b'{"role":"assistant","content":""}'
            + _CLOSE_CHOICE
            + self._tail
        )
        self._include_usage = include_usage
        self._events = AnthropicEvents()
        self._counts = TokenCounts()
        self._started = False
        self._finish_reason: str | None = None
        self._tool_index: dict[int, int] = {}  # Anthropic block index -> OpenAI tool call index
        self._tool_call_ids: list[str] = []
        self._thinking: list[ThinkingPieces | dict[str, Any]] = []
        self._thinking_chars = 0
        self._length = 0  # characters of content sent so far
        self._cited: dict[int, tuple[int, list[Any]]] = {}  # text block -> (its start, citations)
        self._notes: list[dict[str, Any]] = []  # annotations of the text blocks done
        self.done = False  # [DONE] (or the error) was returned; later input is ignored

    # ---- results ----------------------------------------------------------------------------

    @property
    def ignored_events(self) -> int:
        """Frames that did not decode as a known event (skipped)."""
        return self._events.ignored

    @property
    def finish_reason(self) -> str | None:
        """The OpenAI finish reason once ``message_delta`` (or ``message_stop``) arrived."""
        return self._finish_reason

    @property
    def usage(self) -> CompletionUsage:
        """The OpenAI usage of what has been streamed so far (final after ``message_stop``)."""
        return to_chat_usage(self._counts, self._thinking_chars)

    @property
    def kept_thinking(self) -> ThinkingKept | None:
        """The turn's thinking blocks when it called tools, else None."""
        if not self._tool_call_ids or not self._thinking:
            return None
        blocks = [b.to_block() if isinstance(b, ThinkingPieces) else b for b in self._thinking]
        return ThinkingKept(tool_call_ids=list(self._tool_call_ids), blocks=blocks)

    # ---- input ------------------------------------------------------------------------------

    def feed(self, frames: bytes) -> bytes:
        """The OpenAI SSE bytes for these Anthropic frames (possibly b"")."""
        if self.done:
            return b""
        out: list[bytes] = []
        for event in self._events.read(frames):
            if isinstance(event, ContentBlockDelta):
                self._on_delta(event, out)
            elif isinstance(event, ContentBlockStart):
                self._on_block_start(event, out)
            elif isinstance(event, ContentBlockStop):
                self._on_block_stop(event.index)
            elif isinstance(event, MessageStart):
                self._counts.merge(event.message.usage)
                self._start(out)
            elif isinstance(event, MessageDelta):
                self._counts.merge(event.usage)
                self._finish(event.delta.stop_reason, out)
            elif isinstance(event, MessageStop):
                self._finish(None, out)
                if self._include_usage:
                    out.append(self._head + b'],"usage":' + _encode(self.usage) + b"}\n\n")
                out.append(DONE)
                self.done = True
                break
            elif isinstance(event, Error):
                status = STATUS_OF_TYPE.get(event.error.type, 500)
                out.append(self.error(status, event.error.message))
                break
            # ping: nothing to send
        return b"".join(out)

    def error(self, status: int, message: str) -> bytes:
        """A mid-stream failure: the error chunk and [DONE], no usage chunk; b"" once done."""
        if self.done:
            return b""
        self.done = True
        reply = ReplyError(status=status, type=type_for_status(status), message=message)
        return OPENAI.event(reply, "")

    def finish(self) -> bytes:
        """End of input: b"" after [DONE]; a stream cut before ``message_stop`` is a failure."""
        return self.error(500, "the model's response stream ended before it was complete")

    # ---- events -----------------------------------------------------------------------------

    def _start(self, out: list[bytes]) -> None:
        if not self._started:
            self._started = True
            out.append(self._role_chunk)

    def _finish(self, stop_reason: str | None, out: list[bytes]) -> None:
        if self._finish_reason is not None:
            return
        self._start(out)
        for index in list(self._cited):  # blocks the stream did not stop (cut by message_stop)
            self._on_block_stop(index)
        if self._notes:
            out.append(
                self._head
                + _OPEN_CHOICE
                + b'{"annotations":'
                + _encode(self._notes)
                + b"}"
                + _CLOSE_CHOICE
                + self._tail
            )
        reason = to_finish_reason(stop_reason)
        self._finish_reason = reason
        out.append(
            self._head
            + _OPEN_CHOICE
            + b'{},"logprobs":null,"finish_reason":"'
            + reason.encode()
            + b'"}'
            + self._tail
        )

    def _on_delta(self, event: ContentBlockDelta, out: list[bytes]) -> None:
        delta = event.delta
        if isinstance(delta, TextDelta):
            if delta.text and self._finish_reason is None:
                self._start(out)
                self._length += len(delta.text)
                out.append(self._text_open + _encode(delta.text) + self._text_close)
        elif isinstance(delta, CitationsDelta):
            cited = self._cited.get(event.index)
            if cited is not None and delta.citation is not None:
                cited[1].append(delta.citation)
        elif isinstance(delta, InputJsonDelta):
            k = self._tool_index.get(event.index)
            if k is not None and delta.partial_json and self._finish_reason is None:
                out.append(
                    self._args_open
                    + str(k).encode()
                    + b',"function":{"arguments":'
                    + _encode(delta.partial_json)
                    + b"}}]}"
                    + _CLOSE_CHOICE
                    + self._tail
                )
        elif isinstance(delta, ThinkingDelta):
            block = self._thinking[-1] if self._thinking else None
            if isinstance(block, ThinkingPieces):
                block.text.append(delta.thinking)
            self._thinking_chars += len(delta.thinking)
        elif isinstance(delta, SignatureDelta):
            block = self._thinking[-1] if self._thinking else None
            if isinstance(block, ThinkingPieces):
                block.signature.append(delta.signature)

    def _on_block_stop(self, index: int) -> None:
        cited = self._cited.pop(index, None)
        if cited is not None and self._finish_reason is None:
            start, citations = cited
            notes = url_citations(citations, start, self._length)
            self._notes += [chat_annotation(a) for a in notes]

    def _on_block_start(self, event: ContentBlockStart, out: list[bytes]) -> None:
        block = event.content_block
        if isinstance(block, TextBlock):
            self._cited[event.index] = (self._length, [])
        elif isinstance(block, ToolUseBlock):
            if self._finish_reason is not None:
                return
            self._start(out)
            k = len(self._tool_call_ids)
            self._tool_index[event.index] = k
            self._tool_call_ids.append(block.id)
            out.append(
                self._args_open
                + str(k).encode()
                + b',"id":'
                + _encode(block.id)
                + b',"type":"function","function":{"name":'
                + _encode(block.name)
                + b',"arguments":""}}]}'
                + _CLOSE_CHOICE
                + self._tail
            )
        elif isinstance(block, ThinkingBlock):
            self._thinking.append(ThinkingPieces(block.thinking, block.signature))
            self._thinking_chars += len(block.thinking)
        elif isinstance(block, RedactedThinkingBlock):
            self._thinking.append(thinking_dict(block))
