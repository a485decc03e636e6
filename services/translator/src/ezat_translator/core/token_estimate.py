"""The translator's local estimate of a count_tokens request's input tokens: what the router
answers when no deployment of the model can count (docs/api.md, "count_tokens").

Clients call count_tokens to check that a prompt fits the context window, so an estimate below
the exact count is the harmful mistake; every rule here errs high:

- text (system, text, thinking, redacted thinking, a tool's name and description, the JSON of a
  tool_use ``input`` and of a tool's ``input_schema``, a text document): one token per
  ``BYTES_PER_TOKEN`` (3) bytes of UTF-8, rounded up. Claude's tokenizer averages about 3.5-4
  characters a token on English prose; 3 bytes is one token a CJK character, and fewer ASCII
  characters a token than code or JSON usually needs;
- each message ``MESSAGE_TOKENS`` and each content block ``BLOCK_TOKENS`` (role and block
  framing), and ``TOOLS_TOKENS`` once when there are tools (Anthropic's tool-use system prompt,
  at most 530 tokens by its pricing page);
- an image: ``width * height / 750`` tokens (Anthropic's vision page), at most ``IMAGE_TOKENS``
  (1,600, what an image costs after the API resizes it), read from the PNG/JPEG/GIF/WebP header
  of a base64 image (``ezat_common.media.image_size``); the cap when the header does not say
  (a URL source, a header beyond the first ``SIZE_BYTES``);
- a base64 PDF: ``PDF_PAGE_TOKENS`` (3,000 of text plus an image, Anthropic's PDF page) a page,
  the pages counted by their ``/Type /Page`` objects, or when those are compressed out of sight
  one page per ``PDF_BYTES_PER_PAGE`` bytes, between 1 and ``PDF_MAX_PAGES``; a PDF by URL is
  one page (its bytes are not fetched for a count);
- a block of any other type: its JSON as text.

Pure: ``input_estimate(data)`` of the decoded request; only count_tokens pays for it.
"""

from __future__ import annotations

import binascii
import math
import re
from typing import Any

import msgspec
from ezat_common.media import IMAGE_TYPES, PDF, SIZE_BYTES, image_size

BYTES_PER_TOKEN = 3
MESSAGE_TOKENS = 6
BLOCK_TOKENS = 4
TOOLS_TOKENS = 550
IMAGE_TOKENS = 1600
PIXELS_PER_TOKEN = 750
PDF_PAGE_TOKENS = 3000 + IMAGE_TOKENS
PDF_BYTES_PER_PAGE = 20_000
PDF_MAX_PAGES = 100  # Anthropic's limit of pages per request
# base64 characters holding the first SIZE_BYTES of an image (4 characters a 3 bytes).
_SIZE_CHARS = SIZE_BYTES // 3 * 4
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_encode = msgspec.json.encode


def input_estimate(data: dict[str, Any]) -> int:
    """The estimated input tokens of a count_tokens body (decoded, its shape checked by
    ``messages._checked``: ``messages`` is a list)."""
    total = _content_tokens(data.get("system"))
    tools = data.get("tools")
    if isinstance(tools, list) and tools:
        total += TOOLS_TOKENS + sum(_tool_tokens(tool) for tool in tools)
    for message in data.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else message
        total += MESSAGE_TOKENS + _content_tokens(content)
    return total


def text_tokens(text: str) -> int:
    """Tokens of ``text``: its UTF-8 bytes over ``BYTES_PER_TOKEN``, rounded up."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


def _json_tokens(value: Any) -> int:
    try:
        return -(-len(_encode(value)) // BYTES_PER_TOKEN)
    except (TypeError, msgspec.EncodeError):
        return text_tokens(str(value))


def _tool_tokens(tool: Any) -> int:
    if not isinstance(tool, dict):
        return _json_tokens(tool)
    fields = ("name", "description", "input_schema")
    if tool.get("input_schema") is None or any(k not in fields for k in tool if k != "type"):
        # A server tool or a field this rule does not name: all of it, as JSON.
        return BLOCK_TOKENS + _json_tokens(tool)
    return (
        BLOCK_TOKENS
        + text_tokens(str(tool.get("name", "")))
        + text_tokens(str(tool.get("description", "")))
        + _json_tokens(tool.get("input_schema"))
    )


def _content_tokens(content: Any) -> int:
    """A ``system``, a message's or a tool_result's content: a string or a list of blocks."""
    if content is None:
        return 0
    if isinstance(content, str):
        return text_tokens(content)
    if isinstance(content, list):
        return sum(BLOCK_TOKENS + _block_tokens(block) for block in content)
    return _json_tokens(content)


def _block_tokens(block: Any) -> int:
    if not isinstance(block, dict):
        return _json_tokens(block)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return text_tokens(block["text"])
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return text_tokens(block["thinking"])
    if kind == "redacted_thinking" and isinstance(block.get("data"), str):
        return text_tokens(block["data"])
    if kind == "tool_use":
        return text_tokens(str(block.get("name", ""))) + _json_tokens(block.get("input"))
    if kind == "tool_result":
        return _content_tokens(block.get("content"))
    if kind == "image":
        return image_tokens(block.get("source"))
    if kind == "document":
        return _document_tokens(block.get("source"))
    return _json_tokens(block)


def image_tokens(source: Any) -> int:
    """An image block's tokens: ``width * height / 750`` from its header, at most 1,600."""
    if isinstance(source, dict) and source.get("type") == "base64":
        size = _base64_image_size(source.get("data"))
        if size is not None:
            width, height = size
            return min(math.ceil(width * height / PIXELS_PER_TOKEN), IMAGE_TOKENS)
    return IMAGE_TOKENS


def _base64_image_size(data: Any) -> tuple[int, int] | None:
    if not isinstance(data, str):
        return None
    head = data[:_SIZE_CHARS]
    try:
        raw = binascii.a2b_base64(head[: len(head) // 4 * 4])
    except (binascii.Error, ValueError):
        return None
    return image_size(raw)


def _document_tokens(source: Any) -> int:
    if not isinstance(source, dict):
        return PDF_PAGE_TOKENS
    kind = source.get("type")
    if kind == "text":
        return text_tokens(str(source.get("data", "")))
    if kind == "content":
        return _content_tokens(source.get("content"))
    if kind == "base64" and isinstance(source.get("data"), str):
        media_type = source.get("media_type")
        if media_type in IMAGE_TYPES:
            return image_tokens(source)
        if media_type == PDF or media_type is None:
            return pdf_pages(source["data"]) * PDF_PAGE_TOKENS
        return text_tokens(source["data"])
    return PDF_PAGE_TOKENS


def pdf_pages(data: str) -> int:
    """A base64 PDF's page count: its page objects, else one page a ``PDF_BYTES_PER_PAGE``
    bytes (page objects inside compressed object streams cannot be seen), 1 to 100."""
    try:
        raw = binascii.a2b_base64(data)
    except (binascii.Error, ValueError):
        return 1
    pages = len(_PAGE.findall(raw)) or -(-len(raw) // PDF_BYTES_PER_PAGE)
    return max(1, min(pages, PDF_MAX_PAGES))
