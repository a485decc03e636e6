"""OpenAI ``messages`` as Anthropic ``system`` and ``messages`` (docs/api.md, "Messages").

- ``system`` and ``developer`` messages are collected, wherever they are, into the system prompt.
- ``user`` parts become text, image and document blocks; ``tool`` messages become ``tool_result``
  blocks of a user turn, placed before the other blocks of that turn.
- ``assistant`` content becomes text blocks and its ``tool_calls`` ``tool_use`` blocks.
- Consecutive messages of one side (user and tool; assistant) are merged into one turn. The order
  is otherwise kept as sent: a conversation may start with an assistant turn.

Empty text is dropped (Anthropic refuses empty text blocks), and a message left with nothing is
skipped. Client ``cache_control`` on parts is carried when the model caches, dropped otherwise.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec
from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from ezat_common.media import IMAGE_TYPES, PDF_TYPES
from ezat_common.schemas.openai import (
    AnyMessage,
    AssistantMessage,
    AudioPart,
    DeveloperMessage,
    FilePart,
    FunctionMessage,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)
from msgspec import Struct

from .media import is_data_url, read_data_url

MAX_IMAGE_URLS = 20
NO_USER_MESSAGE = "must contain at least one user message"

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


class _Builder:
    def __init__(self, model: ModelConfig) -> None:
        self.model = model
        self.keep_cache = model.prompt_caching
        self.client_cache = False
        self.system: list[SystemPart] = []
        self.turns: list[_Turn] = []
        self.url_images: dict[int, tuple[str, str]] = {}  # id(block) -> (path, url)

    # ---- helpers ----

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

    def text_blocks(self, content: str | list[Any]) -> list[dict[str, Any]]:
        """Text blocks of a string or of text parts (refusal parts are skipped)."""
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content else []
        blocks: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, TextPart) and part.text:
                blocks.append(self.cached({"type": "text", "text": part.text}, part.cache_control))
        return blocks

    # ---- messages ----

    def add(self, i: int, message: AnyMessage) -> None:
        match message:
            case SystemMessage() | DeveloperMessage():
                self.add_system(message.content)
            case UserMessage():
                blocks = self.user_blocks(i, message.content)
                if blocks:
                    self.turn("user").blocks.extend(blocks)
            case ToolMessage():
                self.add_tool_result(message)
            case AssistantMessage():
                self.add_assistant(i, message)
            case FunctionMessage():
                raise invalid(
                    f"messages[{i}].role",
                    'the legacy "function" role is not supported; use tool messages',
                )

    def add_system(self, content: str | list[TextPart]) -> None:
        if isinstance(content, str):
            if content:
                self.system.append(SystemPart(content, None))
            return
        for part in content:
            if part.cache_control is not None:
                self.client_cache = True
            if part.text:
                marker = part.cache_control if self.keep_cache else None
                self.system.append(SystemPart(part.text, marker))

    def add_tool_result(self, message: ToolMessage) -> None:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        if isinstance(message.content, str):
            if message.content:
                block["content"] = message.content
        else:
            texts = self.text_blocks(message.content)
            if texts:
                block["content"] = texts
        self.turn("user").results.append(block)

    def add_assistant(self, i: int, message: AssistantMessage) -> None:
        blocks = [] if message.content is None else self.text_blocks(message.content)
        for k, call in enumerate(message.tool_calls or []):
            path = f"messages[{i}].tool_calls[{k}]"
            if call.type != "function":
                raise invalid(f"{path}.type", f'must be "function"; got {call.type!r}')
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.function.name,
                    "input": _arguments(call.function.arguments, f"{path}.function.arguments"),
                }
            )
        if blocks:
            self.turn("assistant").blocks.extend(blocks)

    def user_blocks(self, i: int, content: str | list[Any]) -> list[dict[str, Any]]:
        if isinstance(content, str):
            return self.text_blocks(content)
        blocks: list[dict[str, Any]] = []
        for j, part in enumerate(content):
            path = f"messages[{i}].content[{j}]"
            match part:
                case TextPart():
                    blocks.extend(self.text_blocks([part]))
                case ImagePart():
                    blocks.append(self.cached(self.image_block(part, path), part.cache_control))
                case FilePart():
                    blocks.append(self.cached(self.document_block(part, path), part.cache_control))
                case AudioPart():
                    raise invalid(f"{path}.input_audio", "audio input is not supported")
        return blocks

    def image_block(self, part: ImagePart, path: str) -> dict[str, Any]:
        path = f"{path}.image_url.url"
        url = part.image_url.url
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
            raise invalid(path, f"at most {MAX_IMAGE_URLS} image URLs are allowed per request")
        block = {"type": "image", "source": {"type": "url", "url": url}}
        self.url_images[id(block)] = (path, url)
        return block

    def document_block(self, part: FilePart, path: str) -> dict[str, Any]:
        if part.file.file_id is not None:
            raise invalid(
                f"{path}.file.file_id",
                "file_id is not supported: there is no Files API; "
                "send the PDF as file_data (data:application/pdf;base64,...)",
            )
        if part.file.file_data is None:
            raise invalid(f"{path}.file.file_data", "Field required")
        path = f"{path}.file.file_data"
        if not self.model.pdf:
            raise invalid(path, f"`{self.model.id}` does not accept PDFs")
        media_type, data = read_data_url(part.file.file_data, PDF_TYPES, path)
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }

    # ---- result ----

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


def _arguments(text: str, path: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = _decode_json(text)
    except msgspec.DecodeError as exc:
        raise invalid(path, f"is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise invalid(path, "must be a JSON object")
    return value


def to_conversation(messages: list[AnyMessage], model: ModelConfig) -> Conversation:
    if all(isinstance(m, SystemMessage | DeveloperMessage) for m in messages):
        raise invalid("messages", NO_USER_MESSAGE)
    builder = _Builder(model)
    for i, message in enumerate(messages):
        builder.add(i, message)
    conversation = builder.result()
    if not conversation.messages:
        raise invalid("messages", NO_USER_MESSAGE)
    return conversation
