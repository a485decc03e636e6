"""The web searches of a Responses stream (responses_stream.py) while they are streamed: a
``server_tool_use`` block gathers its input's JSON pieces until it stops, then waits, by its id,
for its ``web_search_tool_result``; the ``web_search_call`` item is made from both, so all its
events come when the result does (the item's id seals the result)."""

from __future__ import annotations

from typing import Any

from ezat_common.schemas.anthropic import ServerToolUseBlock

from ezat_translator.core.web_search import streamed_use_block


class StreamedSearches:
    """Searches under way: block index -> (the block, its input's pieces) until the block
    stops, then its id -> the block as Anthropic wants it back, until its result."""

    __slots__ = ("_streaming", "_whole")

    def __init__(self) -> None:
        self._streaming: dict[int, tuple[ServerToolUseBlock, list[str]]] = {}
        self._whole: dict[str, dict[str, Any]] = {}

    def start(self, index: int, block: ServerToolUseBlock) -> None:
        self._streaming[index] = (block, [])

    def piece(self, index: int, partial_json: str) -> None:
        """A piece of a search's input (ignored when the block at ``index`` is no search)."""
        found = self._streaming.get(index)
        if found is not None:
            found[1].append(partial_json)

    def stop(self, index: int) -> None:
        """A block ended that was no output item: if a search, its input is whole."""
        found = self._streaming.pop(index, None)
        if found is not None:
            block, pieces = found
            self._whole[block.id] = streamed_use_block(block.id, block.name, block.input, pieces)

    def result(self, tool_use_id: str) -> dict[str, Any] | None:
        """The search a result belongs to (None: none was streamed), no longer under way."""
        return self._whole.pop(tool_use_id, None)
