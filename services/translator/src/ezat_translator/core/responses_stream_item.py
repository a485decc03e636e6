"""One output item of a Responses stream while it is streamed (responses_stream.py): the block it
comes from, what it gathered, and its delta event spliced from bytes encoded once per item. A
message item gathers a run of text blocks (anthropic_to_responses.py): its text is theirs joined,
and each block's citations span that block's place in it."""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.schemas.anthropic import TextBlock, ToolUseBlock

from ezat_translator.core.anthropic_answer import ThinkingPieces
from ezat_translator.core.anthropic_to_responses import message_item, output_text_part
from ezat_translator.core.web_search import url_citations

_encode = msgspec.json.Encoder().encode

_TEXT_DELTA = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta"'
_ARGS_DELTA = (
    b"event: response.function_call_arguments.delta\n"
    b'data: {"type":"response.function_call_arguments.delta"'
)


class StreamItem:
    """One output item being streamed: the block it comes from and what it gathered."""

    __slots__ = (
        "block",
        "citations",
        "custom",
        "delta_end",
        "delta_head",
        "delta_tail",
        "id",
        "index",
        "notes",
        "pieces",
        "start",
        "thinking",
    )

    def __init__(
        self,
        item_id: str,
        index: int,
        block: TextBlock | ToolUseBlock | None,
        custom: bool = False,
    ) -> None:
        self.id = item_id
        self.custom = custom  # a custom tool's call: its text goes out whole, at its end
        self.index = index
        self.block = block  # None: a reasoning item
        self.pieces: list[str] = []  # text or arguments
        self.citations: list[Any] = []  # the current text block's, from citations_delta events
        self.notes: list[dict[str, Any]] = []  # a message's annotations, as announced
        self.start = 0  # where the current text block starts in the message's text
        self.thinking: ThinkingPieces | dict[str, Any] | None = None
        text = isinstance(block, TextBlock)
        self.delta_head = (_TEXT_DELTA if text else _ARGS_DELTA) + b',"sequence_number":'
        self.delta_tail = (
            b',"item_id":'
            + _encode(item_id)
            + b',"output_index":'
            + str(index).encode()
            + (b',"content_index":0' if text else b"")
            + b',"delta":'
        )
        self.delta_end = b',"logprobs":[]}\n\n' if text else b"}\n\n"

    def next_text_block(self) -> None:
        """A further text block of this message: its text follows the blocks' before it."""
        self.start = sum(map(len, self.pieces))
        self.citations = []

    def cite(self) -> list[tuple[str, dict[str, Any]]]:
        """The ``annotation.added`` events of the text block that ended: its citations, spanning
        its text; ``annotation_index`` counts within the part."""
        notes = url_citations(self.citations, self.start, sum(map(len, self.pieces)))
        self.citations = []
        where = {"item_id": self.id, "output_index": self.index, "content_index": 0}
        events = []
        for note in notes:
            fields = {**where, "annotation_index": len(self.notes), "annotation": note}
            events.append(("response.output_text.annotation.added", fields))
            self.notes.append(note)
        return events

    def text_done(self) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
        """The events that end a message (its last block's annotations, then its text and its
        part done) and the item as done."""
        events = self.cite()
        text = "".join(self.pieces)
        where = {"item_id": self.id, "output_index": self.index, "content_index": 0}
        part = output_text_part(text, self.notes)
        events.append(("response.output_text.done", {**where, "text": text, "logprobs": []}))
        events.append(("response.content_part.done", {**where, "part": part}))
        return events, message_item(self.id, [part], "completed")
