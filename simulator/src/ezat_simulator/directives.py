"""The directives a request can carry (pure): read from its last user message, they steer
engine.py's answer.

Directives are written in the last user message as ``[sim:NAME]`` or ``[sim:NAME=VALUE]``; one
bracket may hold several, separated by spaces or commas (``[sim:think tokens=40]``):

==================  ==========================================================================
``tokens=N``        reply length in tokens (0 = no text block)
``think[=N]``       a thinking block of N (default 8) tokens before the text
``tool=NAME``       call tool NAME; stop_reason ``tool_use``
``arg=WORD``        the tool input's string values are WORD instead of ``"Oslo"``
``status=CODE``     answer with that HTTP error instead (Anthropic error body)
``echo``            with ``status``: the error's message quotes the last user message (its
                    first 200 characters), as a real deployment's validation message may
``fail_after=K``    stream: ``event: error`` (overloaded_error) after K content tokens;
                    non-stream: 500 api_error
``drop_after=K``    stream: close the connection after K content tokens, without message_stop;
                    non-stream: close it without an answer
``stall_after=K``   stream: send K content tokens, then nothing, the connection kept open;
                    non-stream: the headers and half the body, then nothing
``never_answer``    read the request, never send a status line (the connection kept open)
``html``            200 with ``content-type: text/html`` and an HTML page instead of the answer
``first_token_ms``  delay before the first content delta (overrides the instance's)
``token_ms``        delay between deltas (overrides the instance's)
``refuse``          stop_reason ``refusal``
``stop=WORD``       stop_reason ``stop_sequence``, stop_sequence WORD
``web_search=N``    the final usage reports N server-side web searches; with a web search
                    tool in the request, the model runs N searches (``websearch.py``)
``web_fetch=N``     the final usage reports N server-side web fetches
==================  ==========================================================================

``web_search``/``web_fetch`` put Anthropic's ``"server_tool_use": {"web_search_requests": N,
"web_fetch_requests": M}`` (the one not given at 0) in the final usage only (the body's, the
message_delta's); no search blocks unless the request has a web search tool (then it searches
once even without the directive). Without either, usage has no ``server_tool_use``.

K counts "content tokens": thinking and text deltas. When the reply has fewer, the failure comes
before message_delta, so these directives always fail the request. The stalls and
``never_answer`` last until the client closes the connection.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .tokens import seed_of
from .validate import InvalidRequest

DEFAULT_THINKING_TOKENS = 8
_DIRECTIVE = re.compile(r"\[sim:([^\]]*)\]")
_SPLIT = re.compile(r"[\s,]+")


@dataclass(frozen=True, slots=True)
class Directives:
    tokens: int | None = None
    think: int | None = None
    tool: str | None = None
    status: int | None = None
    fail_after: int | None = None
    drop_after: int | None = None
    stall_after: int | None = None
    first_token_ms: float | None = None
    token_ms: float | None = None
    refuse: bool = False
    stop: str | None = None
    never_answer: bool = False
    html: bool = False
    echo: bool = False
    web_search: int | None = None
    web_fetch: int | None = None
    arg: str = "Oslo"


NO_DIRECTIVES = Directives()


def _count(value: str | None) -> int:
    if value is None or not value.isdigit():
        raise ValueError("expects a whole number")
    return int(value)


def _millis(value: str | None) -> float:
    try:
        ms = float(value or "")
    except ValueError:
        raise ValueError("expects milliseconds") from None
    if ms < 0:
        raise ValueError("expects milliseconds")
    return ms


def _word(value: str | None) -> str:
    if not value:
        raise ValueError("expects a value")
    return value


def _status(value: str | None) -> int:
    code = _count(value)
    if not 400 <= code <= 599:
        raise ValueError("expects an HTTP error status (400-599)")
    return code


_PARSERS = {
    "tokens": _count,
    "tool": _word,
    "status": _status,
    "fail_after": _count,
    "drop_after": _count,
    "stall_after": _count,
    "first_token_ms": _millis,
    "token_ms": _millis,
    "stop": _word,
    "arg": _word,
    "web_search": _count,
    "web_fetch": _count,
}


_FLAGS = frozenset({"refuse", "never_answer", "html", "echo"})


def parse_directives(text: str, path: str = "messages") -> Directives:
    """The ``[sim:...]`` directives in ``text``; an unknown or malformed one is a 400."""
    if "[sim:" not in text:
        return NO_DIRECTIVES
    found: dict[str, Any] = {}
    for group in _DIRECTIVE.findall(text):
        for item in _SPLIT.split(group.strip()):
            if not item:
                continue
            name, _, value = item.partition("=")
            try:
                if name == "think":
                    found["think"] = _count(value) if value else DEFAULT_THINKING_TOKENS
                elif name in _FLAGS:
                    if value:
                        raise ValueError("takes no value")
                    found[name] = True
                elif name in _PARSERS:
                    found[name] = _PARSERS[name](value or None)
                else:
                    raise ValueError("is not a simulator directive")
            except ValueError as exc:
                raise InvalidRequest(f"{path}: [sim:{item}] {exc}") from None
    return Directives(**found)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content if isinstance(content, list) else ():
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "tool_result":
            texts.append(text_of(block.get("content", "")))
    return "\n".join(texts)


def last_user_text(messages: list[Any]) -> tuple[int, str]:
    """Index and text of the last user message (text blocks and tool results), or (-1, "")."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "user":
            return i, text_of(messages[i]["content"])
    return -1, ""


def read_directives(req: Mapping[str, Any]) -> tuple[Directives, int]:
    """Directives of a validated request, and the seed of its reply."""
    index, text = last_user_text(req["messages"])
    return parse_directives(text, f"messages.{index}.content"), seed_of(text)


# ---- the plan -------------------------------------------------------------------------------
