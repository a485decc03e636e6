"""The simulator's token model: deterministic, pure, and simple enough to predict by hand.

Input
    A request is read as a sequence of *blocks* in prompt order: each tool definition, then each
    system text block (a string system prompt is one block), then each message's content blocks
    (a string content is one block). Every block has a canonical text:

    - tool: its JSON (msgspec-encoded, ``cache_control`` removed);
    - text: ``text``; thinking: ``thinking``; redacted_thinking: ``data``;
    - tool_use: ``name`` followed by the JSON of ``input``;
    - tool_result: its string content, or the canonical text of its nested blocks;
    - document with a ``text`` source: the source's ``data``;
    - image, and any other document: a fixed ``IMAGE_TOKENS`` (1000) tokens, i.e. 4000 characters.

    A prefix of N characters is ``ceil(N / 4)`` tokens; the request's input tokens are that of the
    whole sequence. Roles and block types do not count, they only feed the prefix hash.

Output
    Every emitted token is exactly four characters: a space and a three-letter word from
    ``VOCAB`` (" the", " fox", ...). A reply of N tokens is N * 4 characters, so anyone can recount
    output tokens as ``ceil(chars / 4)``. Tool-call JSON counts ``ceil(len(json) / 4)`` tokens.

Prompt-cache prefixes
    When a request carries a ``cache_control`` breakpoint, each block boundary gets the token
    count and a hash (blake2b over the model name and the canonical prefix) of everything up to
    and including that block; ``cache.py`` decides reads and writes from those.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import msgspec

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1000
IMAGE_CHARS = IMAGE_TOKENS * CHARS_PER_TOKEN

# 64 three-letter words; each output token is one of them with a leading space.
_WORDS = (
    "the fox sky sea sun day owl cat dog map row key box cup elk fig gem hat ink jar kit "
    "log mud net oak pen rug saw tin urn van wax yak zoo arc bay cob den eel fir gap hut "
    "ivy jet kin lid mat nut orb pod ram sod tub vat wig yew ace bud cab dew ear elm fog gum"
)
VOCAB: tuple[str, ...] = tuple(" " + w for w in _WORDS.split())

# Replies are slices of one fixed pseudo-random ring of tokens, so building a reply of N tokens is
# a string slice, not N lookups (the simulator is benchmarked against the gateway).
_RING_TOKENS = 4096


def _ring() -> str:
    state = 0x2545F491
    out = []
    for _ in range(_RING_TOKENS):
        # xorshift32: fixed, portable, and independent of Python's hash seed.
        state ^= (state << 13) & 0xFFFFFFFF
        state ^= state >> 17
        state ^= (state << 5) & 0xFFFFFFFF
        out.append(VOCAB[state & 63])
    return "".join(out)


_RING = _ring()
_RING_TWICE = _RING + _RING


def tokens_for_chars(chars: int) -> int:
    """``ceil(chars / 4)``: the single rule for turning characters into tokens."""
    return -(-chars // CHARS_PER_TOKEN)


def seed_of(text: str) -> int:
    """A stable 64-bit seed for ``text`` (same text, same reply, in every process)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def reply_text(seed: int, n_tokens: int) -> str:
    """``n_tokens`` output tokens (``4 * n_tokens`` characters) chosen by ``seed``."""
    if n_tokens <= 0:
        return ""
    start = (seed % _RING_TOKENS) * CHARS_PER_TOKEN
    if n_tokens <= _RING_TOKENS:
        return _RING_TWICE[start : start + n_tokens * CHARS_PER_TOKEN]
    rotated = _RING_TWICE[start : start + len(_RING)]
    whole, rest = divmod(n_tokens, _RING_TOKENS)
    return rotated * whole + rotated[: rest * CHARS_PER_TOKEN]


# ---- input ----------------------------------------------------------------------------------


class Part(NamedTuple):
    """One block of the prompt: what it hashes as, how many characters it counts, its marker."""

    key: str
    chars: int
    cache_control: Any


class Boundary(NamedTuple):
    """The prompt up to and including one block, as the prompt cache sees it."""

    tokens: int
    digest: bytes
    ttl: str | None  # "5m" / "1h" when this block carries a cache_control breakpoint


class Measure(NamedTuple):
    input_tokens: int
    # Empty when the request has no breakpoint: nothing can be read or written then.
    boundaries: tuple[Boundary, ...]


_json = msgspec.json.encode


def _nested_text(content: Any) -> tuple[str, int]:
    """Canonical key and character count of a tool_result's or document's nested content."""
    if isinstance(content, str):
        return content, len(content)
    if not isinstance(content, list):
        return "", 0
    keys: list[str] = []
    chars = 0
    for block in content:
        if isinstance(block, Mapping):
            key, n = block_text(block)
            keys.append(key)
            chars += n
    return "\x1f".join(keys), chars


def block_text(block: Mapping[str, Any]) -> tuple[str, int]:
    """Canonical key (for hashing) and counted characters of one content block."""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text", "")
        return text, len(text)
    if kind == "thinking":
        text = block.get("thinking", "")
        return text, len(text)
    if kind == "redacted_thinking":
        text = block.get("data", "")
        return text, len(text)
    if kind in ("tool_use", "server_tool_use"):
        text = str(block.get("name", "")) + _json(block.get("input", {})).decode()
        return text, len(text)
    if kind == "web_search_tool_result":  # the pages found count as read, as the API's do
        text = _json(block.get("content", [])).decode()
        return text, len(text)
    if kind == "tool_result":
        return _nested_text(block.get("content", ""))
    source = block.get("source")
    if kind == "document" and isinstance(source, Mapping):
        if source.get("type") == "text":
            text = str(source.get("data", ""))
            return text, len(text)
        if source.get("type") == "content":
            return _nested_text(source.get("content"))
    # Images and binary documents: a fixed size, hashed by their source.
    return "\x1e" + _json(source).decode(), IMAGE_CHARS


def _tool_key(tool: Mapping[str, Any]) -> str:
    if "cache_control" in tool:
        tool = {k: v for k, v in tool.items() if k != "cache_control"}
    return _json(tool).decode()


def prompt_parts(req: Mapping[str, Any]) -> Iterator[Part]:
    """Every block of a validated request in cache order: tools, system, messages."""
    for tool in req.get("tools") or ():
        key = _tool_key(tool)
        yield Part("tool\x1f" + key, len(key), tool.get("cache_control"))
    system = req.get("system")
    if isinstance(system, str):
        if system:
            yield Part("system\x1f" + system, len(system), None)
    elif system:
        for block in system:
            text = block.get("text", "")
            yield Part("system\x1f" + text, len(text), block.get("cache_control"))
    for message in req["messages"]:
        role = message["role"]
        # A system message may carry only its output_config (no content at all).
        content = message.get("content", "")
        if isinstance(content, str):
            # Hashed like a single text block: the API treats the two forms the same.
            yield Part(f"{role}\x1ftext\x1f{content}", len(content), None)
            continue
        for block in content:
            key, chars = block_text(block)
            yield Part(f"{role}\x1f{block.get('type')}\x1f{key}", chars, block.get("cache_control"))


def input_tokens(req: Mapping[str, Any]) -> int:
    """Input tokens of a validated request (what count_tokens answers)."""
    return tokens_for_chars(sum(p.chars for p in prompt_parts(req)))


def measure(req: Mapping[str, Any], model: str) -> Measure:
    """Input tokens of a validated request, plus its cache boundaries when it has breakpoints."""
    parts = list(prompt_parts(req))
    total = tokens_for_chars(sum(p.chars for p in parts))
    if all(p.cache_control is None for p in parts):
        return Measure(total, ())
    h = hashlib.blake2b(model.encode(), digest_size=16)
    chars = 0
    boundaries = []
    for part in parts:
        # The separator keeps ("ab", "c") and ("a", "bc") apart.
        h.update(part.key.encode() + b"\x00")
        chars += part.chars
        marker = part.cache_control
        ttl = marker.get("ttl", "5m") if isinstance(marker, Mapping) else None
        boundaries.append(Boundary(tokens_for_chars(chars), h.copy().digest(), ttl))
    return Measure(total, tuple(boundaries))
