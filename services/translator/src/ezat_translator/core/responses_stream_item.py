"""One output item of a Responses stream while it is streamed (responses_stream.py): the block it
comes from, what it gathered, and its delta event spliced from bytes encoded once per item."""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.schemas.anthropic import TextBlock, ToolUseBlock

from ezat_translator.core.anthropic_answer import ThinkingPieces

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
        "pieces",
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
        self.citations: list[Any] = []  # a text block's, from citations_delta events
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
