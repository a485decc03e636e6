"""An Anthropic Messages event stream as OpenAI Responses API SSE events
(docs/responses.md, "Response object and stream").

Every event is ``event: <type>\\ndata: {...}\\n\\n`` with a ``sequence_number`` counting from 0:

1. ``message_start`` → ``response.created`` and ``response.in_progress`` (status ``in_progress``,
   no output, no usage);
2. each content block is one output item (anthropic_to_responses.py), between
   ``response.output_item.added`` at its start and ``response.output_item.done`` at its stop,
   except that a run of text blocks is one message item, done when a block of another kind starts
   or the message stops: ``response.content_part.added``, a ``response.output_text.delta`` per
   piece, ``response.output_text.done`` and ``response.content_part.done``; a tool_use block a
   ``response.function_call_arguments.delta`` per piece and ``.done`` (a call whose arguments
   came in no piece gets one, ``{}``, so that the pieces always add up to the arguments); a
   thinking block streams nothing, its item is done with ``encrypted_content`` when sealed;
   a web search (a ``server_tool_use`` block, then its ``web_search_tool_result``) is one
   ``web_search_call`` item whose events (added, ``response.web_search_call.in_progress``,
   ``.searching``, ``.completed``, done) all come when its result does: the item's id seals the
   result (anthropic_to_responses.py), and the SDK wants the same id at added and at done; a
   text block's citations come as ``response.output_text.annotation.added`` events at its stop;
3. ``message_stop`` → nothing from ``feed``: the final ``response.completed`` (or
   ``response.incomplete``), carrying the whole output and the usage, comes from ``final``.

``final`` is separate because the final event may only reach the client once the request's
usage record is durable, the same rule as chat's ``[DONE]``: the caller calls it when that
acknowledgement holds (with chat, the router's held ``message_stop`` frame does this). If billing
fails instead, ``error`` gives ``response.failed`` in its place; a deployment's ``error`` event or
a stream cut before ``message_stop`` (``finish``) gives it too, with the OpenAI error type and
529 reported as 503 (ezat_common.errors). Pings give nothing (the edge writes keep-alive
comments). Events that do not decode are counted in ``ignored_events`` and skipped.
"""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.errors import STATUS_OF_TYPE, responses_failure, responses_sse
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
    ServerToolUseBlock,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
    WebSearchToolResultBlock,
)

from ezat_translator.core.anthropic_answer import (
    AnthropicEvents,
    ThinkingPieces,
    arguments_json,
    thinking_dict,
)
from ezat_translator.core.anthropic_to_responses import (
    ResponseMeta,
    Seal,
    final_response,
    message_item,
    output_text_part,
    reasoning_item,
    response_object,
    to_response_usage,
    web_search_item,
)
from ezat_translator.core.responses_stream_item import StreamItem
from ezat_translator.core.responses_stream_search import StreamedSearches
from ezat_translator.core.token_counts import TokenCounts

_encode = msgspec.json.Encoder().encode


class ResponsesStream:
    """One streaming request: ``feed`` Anthropic SSE bytes, write what it returns; write
    ``final()`` once the usage record is durable."""

    __slots__ = (
        "_counts",
        "_events",
        "_items",
        "_meta",
        "_open",
        "_output",
        "_run",
        "_seal",
        "_search_seal",
        "_searches",
        "_seq",
        "_started",
        "_stop_reason",
        "_thinking_chars",
        "complete",
        "done",
        "response",
    )

    def __init__(
        self, meta: ResponseMeta, seal: Seal | None = None, search_seal: Seal | None = None
    ) -> None:
        self._meta = meta
        self._seal = seal  # thinking: with store or include only
        self._search_seal = search_seal or seal  # a search's id
        self._events = AnthropicEvents()
        self._counts = TokenCounts()
        self._thinking_chars = 0
        self._seq = 0
        self._started = False
        self._stop_reason: str | None = None
        self._open: dict[int, StreamItem] = {}  # Anthropic block index -> its item, until it stops
        self._items = 0  # output items added so far
        # The message item of the current run of text blocks (one item: anthropic_to_responses),
        # open until a block of another kind starts or the message stops.
        self._run: StreamItem | None = None
        self._searches = StreamedSearches()
        self._output: dict[int, dict[str, Any]] = {}  # output index -> the item, once done
        self.complete = False  # message_stop arrived: ``final`` has the final event
        self.done = False  # the final event or response.failed was returned; the rest ignored
        self.response: dict[str, Any] | None = None  # the final response object, once made

    # ---- results ----------------------------------------------------------------------------

    @property
    def ignored_events(self) -> int:
        """Frames that did not decode as a known event (skipped)."""
        return self._events.ignored

    @property
    def usage(self) -> dict[str, Any]:
        """The Responses usage of what has been streamed so far (final after message_stop)."""
        return to_response_usage(self._counts, self._thinking_chars)

    @property
    def stop_reason(self) -> str | None:
        return self._stop_reason

    # ---- input ------------------------------------------------------------------------------

    def feed(self, frames: bytes) -> bytes:
        """The Responses SSE bytes for these Anthropic frames (possibly b"")."""
        if self.done or self.complete:
            return b""
        out: list[bytes] = []
        for event in self._events.read(frames):
            if isinstance(event, ContentBlockDelta):
                self._on_delta(event, out)
            elif isinstance(event, ContentBlockStart):
                self._on_block_start(event, out)
            elif isinstance(event, ContentBlockStop):
                item = self._open.pop(event.index, None)
                if item is not None and item is self._run:
                    out.extend(self._event(kind, fields) for kind, fields in item.cite())
                elif item is not None:
                    self._close(item, out)
                else:
                    self._searches.stop(event.index)
            elif isinstance(event, MessageStart):
                self._counts.merge(event.message.usage)
                self._start(out)
            elif isinstance(event, MessageDelta):
                self._counts.merge(event.usage)
                if event.delta.stop_reason is not None:
                    self._stop_reason = event.delta.stop_reason
            elif isinstance(event, MessageStop):
                self._start(out)
                self._end_run(out)
                for index in sorted(self._open, key=lambda k: self._open[k].index):
                    self._close(self._open[index], out)
                self._open.clear()
                self.complete = True
                break
            elif isinstance(event, Error):
                status = STATUS_OF_TYPE.get(event.error.type, 500)
                out.append(self.error(status, event.error.message))
                break
            # ping: nothing to send
        return b"".join(out)

    def final(self) -> bytes:
        """``response.completed`` (or ``response.incomplete``) with the output and the usage,
        once ``message_stop`` arrived; b"" before that and once anything final was returned."""
        if not self.complete or self.done:
            return b""
        self.done = True
        output = [self._output[n] for n in sorted(self._output)]
        response = final_response(
            self._meta, output, self._stop_reason, self._counts, self._thinking_chars
        )
        self.response = response
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        return self._event(kind, {"response": response})

    def error(self, status: int, message: str) -> bytes:
        """A failure after the stream started: ``response.failed`` (no usage: not billed);
        b"" once done. ``status`` is the gateway's (529 is told as 503)."""
        if self.done:
            return b""
        out: list[bytes] = []
        self._start(out)  # the SDK's accumulator wants response.created first
        if self._run is not None and self._run not in self._open.values():
            self._end_run(out)  # its blocks all ended: the message is whole, as far as it went
        self.done = True
        failure = responses_failure(status, message)
        output = [self._output[n] for n in sorted(self._output)]
        response = response_object(self._meta, status="failed", output=output, error=failure)
        out.append(self._event("response.failed", {"response": response}))
        return b"".join(out)

    def finish(self) -> bytes:
        """End of input: b"" after message_stop (``final`` has the rest); a stream cut before
        it is a failure."""
        if self.complete:
            return b""
        return self.error(500, "the model's response stream ended before it was complete")

    # ---- events -----------------------------------------------------------------------------

    def _event(self, kind: str, fields: dict[str, Any]) -> bytes:
        seq = self._seq
        self._seq += 1
        return responses_sse(kind, seq, fields)

    def _start(self, out: list[bytes]) -> None:
        if self._started:
            return
        self._started = True
        response = response_object(self._meta, status="in_progress", output=[])
        out.append(self._event("response.created", {"response": response}))
        out.append(self._event("response.in_progress", {"response": response}))

    def _on_block_start(self, event: ContentBlockStart, out: list[bytes]) -> None:
        block = event.content_block
        meta = self._meta
        n = self._items
        if not isinstance(block, TextBlock):
            self._end_run(out)
        elif self._run is not None:  # the message goes on
            self._run.next_text_block()
            self._open[event.index] = self._run
            if block.text:
                self._delta(self._run, block.text, out)
            return
        if isinstance(block, TextBlock):
            item = StreamItem(meta.item_id("msg", n), n, block)
            added = message_item(item.id, [], "in_progress")
            self._run = item
        elif isinstance(block, ToolUseBlock):
            added = self._meta.call_item(block.id, block.name, "", "in_progress")
            item = StreamItem(added["id"], n, block, custom=self._meta.is_custom(block.name))
        elif isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            item = StreamItem(meta.item_id("rs", n), n, None)
            added = reasoning_item(item.id)
            if isinstance(block, ThinkingBlock):
                item.thinking = ThinkingPieces(block.thinking, block.signature)
                self._thinking_chars += len(block.thinking)
            else:
                item.thinking = thinking_dict(block)
        elif isinstance(block, ServerToolUseBlock):
            self._searches.start(event.index, block)
            return
        elif isinstance(block, WebSearchToolResultBlock):
            self._search_done(block, out)
            return
        else:
            return
        self._start(out)
        self._items += 1
        self._open[event.index] = item
        out.append(self._event("response.output_item.added", {"output_index": n, "item": added}))
        if isinstance(block, TextBlock):
            out.append(
                self._event(
                    "response.content_part.added",
                    {
                        "item_id": item.id,
                        "output_index": n,
                        "content_index": 0,
                        "part": output_text_part(""),
                    },
                )
            )
            if block.text:
                self._delta(item, block.text, out)

    def _on_delta(self, event: ContentBlockDelta, out: list[bytes]) -> None:
        item = self._open.get(event.index)
        delta = event.delta
        if item is None:
            if isinstance(delta, InputJsonDelta):
                self._searches.piece(event.index, delta.partial_json)
            return
        if isinstance(delta, TextDelta):
            if delta.text and isinstance(item.block, TextBlock):
                self._delta(item, delta.text, out)
        elif isinstance(delta, InputJsonDelta):
            if delta.partial_json and isinstance(item.block, ToolUseBlock):
                if item.custom:
                    # JSON pieces of {"input": ...}: the text goes out whole at the block's end.
                    item.pieces.append(delta.partial_json)
                else:
                    self._delta(item, delta.partial_json, out)
        elif isinstance(item.thinking, ThinkingPieces):
            if isinstance(delta, ThinkingDelta):
                item.thinking.text.append(delta.thinking)
                self._thinking_chars += len(delta.thinking)
            elif isinstance(delta, SignatureDelta):
                item.thinking.signature.append(delta.signature)
        elif isinstance(delta, CitationsDelta) and delta.citation is not None:
            item.citations.append(delta.citation)  # only text blocks have them

    def _delta(self, item: StreamItem, piece: str, out: list[bytes]) -> None:
        """A piece of text or arguments: the one event per piece, spliced from bytes."""
        item.pieces.append(piece)
        seq = self._seq
        self._seq += 1
        out.append(
            item.delta_head + str(seq).encode() + item.delta_tail + _encode(piece) + item.delta_end
        )

    def _end_run(self, out: list[bytes]) -> None:
        """The run of text blocks ended: its message item is done."""
        item = self._run
        if item is None:
            return
        self._run = None
        self._open = {k: v for k, v in self._open.items() if v is not item}
        self._close(item, out)

    def _close(self, item: StreamItem, out: list[bytes]) -> None:
        n = item.index
        block = item.block
        if isinstance(block, TextBlock):
            events, done = item.text_done()
            out.extend(self._event(kind, fields) for kind, fields in events)
        elif isinstance(block, ToolUseBlock) and item.custom:
            arguments = "".join(item.pieces) or arguments_json(block.input)
            done = self._meta.call_item(block.id, block.name, arguments, "completed")
            where = {"item_id": item.id, "output_index": n}
            out.append(
                self._event(
                    "response.custom_tool_call_input.delta", {**where, "delta": done["input"]}
                )
            )
            out.append(
                self._event(
                    "response.custom_tool_call_input.done", {**where, "input": done["input"]}
                )
            )
        elif isinstance(block, ToolUseBlock):
            if not item.pieces:
                self._delta(item, arguments_json(block.input), out)
            arguments = "".join(item.pieces)
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    {"item_id": item.id, "output_index": n, "arguments": arguments},
                )
            )
            done = self._meta.call_item(block.id, block.name, arguments, "completed")
        else:
            thinking = item.thinking
            kept = thinking.to_block() if isinstance(thinking, ThinkingPieces) else thinking
            done = reasoning_item(item.id, kept, self._seal)
        self._output[n] = done
        out.append(self._event("response.output_item.done", {"output_index": n, "item": done}))

    # ---- web search ---------------------------------------------------------------------------

    def _search_done(self, block: WebSearchToolResultBlock, out: list[bytes]) -> None:
        """A search's result: its web_search_call item, from added to done."""
        use = self._searches.result(block.tool_use_id)
        if use is None:
            return  # a result without its search (none was streamed): nothing to show
        self._start(out)
        n = self._items
        self._items += 1
        done = web_search_item(self._meta.item_id("ws", n), use, block, self._search_seal)
        added = {**done, "status": "in_progress"}
        out.append(self._event("response.output_item.added", {"output_index": n, "item": added}))
        where = {"item_id": done["id"], "output_index": n}
        for kind in ("in_progress", "searching", "completed"):
            out.append(self._event(f"response.web_search_call.{kind}", where))
        self._output[n] = done
        out.append(self._event("response.output_item.done", {"output_index": n, "item": done}))
