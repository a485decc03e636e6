"""Anthropic turns built from an OpenAI conversation: the rules both OpenAI APIs share.

``TurnBuilder`` is what the Chat Completions translation (``openai_messages``) and the Responses
translation (``responses_items``) each feed with their own input shape:

- system text is collected, wherever it appears, into the system prompt;
- blocks of one side (user, assistant) are merged into one turn until the other side speaks;
  ``tool_result`` blocks lead their user turn, before any other block of it;
- an image is a checked data URL, or an http(s) URL left for the fetcher (``ImageUrlPart``, at
  most ``MAX_IMAGE_URLS``); a PDF is a checked data URL; both only for models that take them;
- client ``cache_control`` is carried when the model caches, dropped otherwise, and noted.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec
from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from ezat_common.media import IMAGE_TYPES, PDF_TYPES
from msgspec import Struct

from .media import is_data_url, read_data_url

MAX_IMAGE_URLS = 20
TOO_MANY_URLS = f"at most {MAX_IMAGE_URLS} image URLs are allowed per request"
NO_USER_MESSAGE = "must contain at least one user message"
NO_FILE_ID = "file_id is not supported: there is no Files API"
PDF_AS_DATA_URL = "send the PDF as file_data (data:application/pdf;base64,...)"

_decode_json = msgspec.json.Decoder().decode

Side = Literal["user", "assistant"]


class ImageUrlPart(Struct, frozen=True, omit_defaults=True):
    """An http(s) image the fetcher must download; the block at ``messages[message_index]
    .content[block_index]`` (or, when ``inner_index`` is set, that block's
    ``content[inner_index]``: an image inside a ``tool_result``) is
    ``{"type": "image", "source": {"type": "url", "url": url}}``."""

    path: str  # client-facing path, e.g. "messages[0].content[2].image_url.url"
    url: str
    message_index: int
    block_index: int
    inner_index: int | None = None


class SystemPart(Struct, frozen=True):
    text: str
    cache_control: dict[str, Any] | None


class Conversation(Struct, frozen=True, kw_only=True):
    system: list[SystemPart]
    messages: list[dict[str, Any]]  # content always a list of blocks here
    image_urls: list[ImageUrlPart]
    tool_turns: list[tuple[int, list[str]]]
    client_cache: bool  # whether any part carried its own cache_control


class _Turn:
    def __init__(self, side: Side) -> None:
        self.side = side
        self.results: list[dict[str, Any]] = []  # tool_result blocks, first in a user turn
        self.blocks: list[dict[str, Any]] = []


class TurnBuilder:
    def __init__(self, model: ModelConfig) -> None:
        self.model = model
        self.keep_cache = model.prompt_caching
        self.client_cache = False
        self.system: list[SystemPart] = []
        self.turns: list[_Turn] = []
        self.url_images: dict[int, tuple[str, str]] = {}  # id(block) -> (path, url)

    def cached(self, block: dict[str, Any], marker: dict[str, Any] | None) -> dict[str, Any]:
        if marker is not None:
            self.client_cache = True
            if self.keep_cache:
                block["cache_control"] = marker
        return block

    def turn(self, side: Side) -> _Turn:
        if not self.turns or self.turns[-1].side != side:
            self.turns.append(_Turn(side))
        return self.turns[-1]

    def add_blocks(self, side: Side, blocks: list[dict[str, Any]]) -> None:
        if blocks:
            self.turn(side).blocks.extend(blocks)

    def add_system_text(self, text: str, marker: dict[str, Any] | None = None) -> None:
        if marker is not None:
            self.client_cache = True
        if text:
            self.system.append(SystemPart(text, marker if self.keep_cache else None))

    def add_tool_result(self, call_id: str, content: str | list[dict[str, Any]]) -> None:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
        if content:
            block["content"] = content
        self.turn("user").results.append(block)

    def image_block(self, url: str, path: str) -> dict[str, Any]:
        """The image block of a data URL, or of an http(s) URL that the fetcher downloads."""
        if not self.model.vision:
            raise invalid(path, f"`{self.model.id}` does not accept images")
        if is_data_url(url):
            media_type, data = read_data_url(url, IMAGE_TYPES, path)
            source = {"type": "base64", "media_type": media_type, "data": data}
            return {"type": "image", "source": source}
        parts = urlsplit(url.strip())
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise invalid(path, "must be a data URL (data:<type>;base64,<data>) or an http(s) URL")
        if len(self.url_images) >= MAX_IMAGE_URLS:
            raise invalid(path, TOO_MANY_URLS)
        block = {"type": "image", "source": {"type": "url", "url": url}}
        self.url_images[id(block)] = (path, url)
        return block

    def document_block(self, file_data: str, path: str) -> dict[str, Any]:
        """The document block of a PDF data URL."""
        if not self.model.pdf:
            raise invalid(path, f"`{self.model.id}` does not accept PDFs")
        media_type, data = read_data_url(file_data, PDF_TYPES, path)
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }

    def result(self) -> Conversation:
        messages: list[dict[str, Any]] = []
        image_urls: list[ImageUrlPart] = []
        tool_turns: list[tuple[int, list[str]]] = []
        for turn in self.turns:
            content = turn.results + turn.blocks
            index = len(messages)
            messages.append({"role": turn.side, "content": content})
            for b, block in enumerate(content):
                found = self.url_images.get(id(block))
                if found is not None:
                    image_urls.append(ImageUrlPart(found[0], found[1], index, b))
            ids = [block["id"] for block in content if block["type"] == "tool_use"]
            if ids:
                tool_turns.append((index, ids))
        return Conversation(
            system=self.system,
            messages=messages,
            image_urls=image_urls,
            tool_turns=tool_turns,
            client_cache=self.client_cache,
        )


def tool_input(text: str, path: str) -> dict[str, Any]:
    """A tool call's JSON arguments as the ``input`` object of a ``tool_use`` block."""
    if not text.strip():
        return {}
    try:
        value = _decode_json(text)
    except msgspec.DecodeError as exc:
        raise invalid(path, f"is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise invalid(path, "must be a JSON object")
    return value


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
