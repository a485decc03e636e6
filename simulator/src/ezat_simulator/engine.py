"""What the simulated model answers: request in, deterministic plan out (pure; no I/O, no clock).

The reply depends only on the request and the instance's message sequence number:

- text: ``tokens.reply_text`` seeded by the last user message, 12 tokens by default;
- a thinking block (8 tokens and a signature) when ``thinking`` is enabled/adaptive or the
  ``think`` directive is given;
- text that is a JSON value of the schema when ``output_config.format`` is ``json_schema``
  (built like a tool's input, below), padded with spaces to the reply's length;
- a tool_use block when ``tool_choice`` forces a tool (``any`` = the first tool) or the ``tool``
  directive names one (unless ``tool_choice`` is ``none``). Its input is built from the tool's
  ``input_schema``: every required property gets ``"Oslo"`` (string), ``1`` (number/integer),
  ``true`` (boolean), ``[]`` (array), an object built the same way, or its first ``enum`` value.
  A tool call has no text block unless ``tokens=N`` asks for one.
- ``max_tokens`` caps thinking, then text; a tool call that no longer fits is left out, and the
  stop reason is then ``max_tokens``.

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

import msgspec

from .cache import CacheUsage
from .tokens import CHARS_PER_TOKEN, reply_text, seed_of, tokens_for_chars
from .validate import InvalidRequest, forced_tool, thinking_enabled, thinking_signature
from .websearch import SearchPart, is_server_tool, plan_searches, searches_wanted

DEFAULT_REPLY_TOKENS = 12
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


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content if isinstance(content, list) else ():
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "tool_result":
            texts.append(_text_of(block.get("content", "")))
    return "\n".join(texts)


def last_user_text(messages: list[Any]) -> tuple[int, str]:
    """Index and text of the last user message (text blocks and tool results), or (-1, "")."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "user":
            return i, _text_of(messages[i]["content"])
    return -1, ""


def read_directives(req: Mapping[str, Any]) -> tuple[Directives, int]:
    """Directives of a validated request, and the seed of its reply."""
    index, text = last_user_text(req["messages"])
    return parse_directives(text, f"messages.{index}.content"), seed_of(text)


# ---- the plan -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    text: str
    signature: str


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    citations: tuple[dict[str, Any], ...] | None = None  # web search citations, when cited


@dataclass(frozen=True, slots=True)
class ToolPart:
    id: str
    name: str
    input: Any
    json: str

    @property
    def tokens(self) -> int:
        return tokens_for_chars(len(self.json))


Part = ThinkingPart | TextPart | ToolPart | SearchPart


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    cache: CacheUsage
    output_tokens: int = 0
    reasoning_tokens: int = 0
    server_tool_use: dict[str, int] | None = None  # Anthropic's object, as the API reports it

    def input_fields(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache.written,
            "cache_read_input_tokens": self.cache.read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache.write_5m,
                "ephemeral_1h_input_tokens": self.cache.write_1h,
            },
        }

    def final(self) -> dict[str, Any]:
        # reasoning_tokens is not Anthropic's; the gateway bills it (ezat_common Usage).
        fields = self.input_fields()
        fields["output_tokens"] = self.output_tokens
        fields["reasoning_tokens"] = self.reasoning_tokens
        if self.server_tool_use is not None:
            fields["server_tool_use"] = dict(self.server_tool_use)
        return fields


@dataclass(frozen=True, slots=True)
class Plan:
    message_id: str
    model: str
    parts: tuple[Part, ...]
    stop_reason: str
    stop_sequence: str | None
    usage: Usage

    @property
    def deltas(self) -> int:
        """Paced steps of the reply: one per thinking/text token, one per tool call.

        A non-streamed reply waits as long as a stream of this many deltas would take.
        """
        return sum(
            1 if isinstance(p, ToolPart | SearchPart) else len(p.text) // CHARS_PER_TOKEN
            for p in self.parts
        )


def example_value(schema: Any, depth: int = 0, text: str = "Oslo") -> Any:
    """A deterministic value satisfying the simple JSON schema ``schema`` (``text`` for every
    string)."""
    if not isinstance(schema, Mapping):
        return text
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        if depth >= 8:
            return {}
        props = schema.get("properties") or {}
        return {
            name: example_value(props.get(name), depth + 1, text)
            for name in schema.get("required") or ()
        }
    return {"number": 1, "integer": 1, "boolean": True, "array": [], "null": None}.get(kind, text)


def _tool_part(req: Mapping[str, Any], name: str, seq: int, text: str) -> ToolPart:
    schema: Any = None
    for tool in req.get("tools") or ():
        if tool.get("name") == name:
            schema = tool.get("input_schema")
            break
    value = example_value(schema, text=text) if schema is not None else {}
    return ToolPart(f"toolu_sim_{seq}", name, value, msgspec.json.encode(value).decode())


def _client_tools(req: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in req.get("tools") or () if not is_server_tool(t)]


def _tool_name(req: Mapping[str, Any], directives: Directives) -> str | None:
    # A server tool (web search) is run by the "API", never returned as a client tool call: when
    # it is forced (or first under "any") the search runs, and "any" calls the first client tool.
    servers = {t.get("name") for t in req.get("tools") or () if is_server_tool(t)}
    clients = _client_tools(req)
    forced = forced_tool(req)
    choice = req.get("tool_choice")
    if forced is not None and forced not in servers:
        return forced
    if forced is not None:
        wants_any = isinstance(choice, Mapping) and choice.get("type") == "any"
        return str(clients[0].get("name", "")) if wants_any and clients else None
    if isinstance(choice, Mapping) and choice.get("type") == "none":
        return None
    if directives.tool is None and _asks_for_a_tool(req):
        return str(clients[0].get("name", ""))
    return directives.tool


def _asks_for_a_tool(req: Mapping[str, Any]) -> bool:
    """A plain-language "use the tool" in the newest user text (not a tool result) calls the
    first tool, so examples written for real models (like the seed page's) behave alike."""
    messages = req["messages"]
    if not _client_tools(req) or messages[-1]["role"] != "user":
        return False
    content = messages[-1]["content"]
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return False
    return "use the tool" in _text_of(content).lower()


def _thinking_part(seed: int, n_tokens: int) -> ThinkingPart:
    text = reply_text(seed // 3 + 1, n_tokens)
    return ThinkingPart(text, thinking_signature(text))


def plan_reply(
    req: Mapping[str, Any],
    directives: Directives,
    seed: int,
    *,
    seq: int,
    input_tokens: int,
    cache: CacheUsage,
) -> Plan:
    """The full reply to a validated request whose input measured ``input_tokens`` in total."""
    budget: int = req["max_tokens"]
    tool_name = _tool_name(req, directives)
    want_think = directives.think
    if want_think is None and thinking_enabled(req):
        want_think = DEFAULT_THINKING_TOKENS
    want_think = want_think or 0
    want_text = directives.tokens
    if want_text is None:
        want_text = 0 if tool_name is not None else DEFAULT_REPLY_TOKENS
    n_think = min(want_think, budget)
    searches, ran, cite = plan_searches(
        req, searches_wanted(req, directives.web_search), seq, last_user_text(req["messages"])[1]
    )
    # The searches come before the answer; what they cost is taken from the text's budget.
    search_tokens = sum(p.tokens for p in searches)
    n_text = max(0, min(want_text, budget - n_think - search_tokens))
    capped = n_think < want_think or n_text < want_text
    parts: list[Part] = []
    if n_think:
        parts.append(_thinking_part(seed, n_think))
    parts.extend(searches)
    if n_text:
        parts.extend(_text_parts(_answer_text(req, seed, n_text), cite))
    output = n_think + n_text + search_tokens
    if tool_name is not None and not capped:
        tool = _tool_part(req, tool_name, seq, directives.arg)
        if tool.tokens <= budget - output:
            parts.append(tool)
            output += tool.tokens
        else:
            capped = True
    stop_reason, stop_sequence = _stop(capped, tool_name, directives)
    uncached = input_tokens - cache.read - cache.written
    servers = _server_tools(directives, ran if searches else None)
    usage = Usage(uncached, cache, output, n_think, servers)
    return Plan(f"msg_sim_{seq}", req["model"], tuple(parts), stop_reason, stop_sequence, usage)


def _text_parts(text: str, cite: dict[str, Any] | None) -> list[TextPart]:
    """The answer after a search: its first half plain, its second half citing the first
    result found (as the API splits text around each citation); without one, one block."""
    if cite is None:
        return [TextPart(text)]
    half = len(text) // CHARS_PER_TOKEN // 2 * CHARS_PER_TOKEN
    cited = TextPart(text[half:], (cite,))
    return [TextPart(text[:half]), cited] if half else [cited]


def _answer_text(req: Mapping[str, Any], seed: int, n_tokens: int) -> str:
    """The reply's text: words, or under ``output_config.format`` (json_schema) a JSON value
    of that schema padded with spaces to ``n_tokens`` (so a short budget still cuts it)."""
    fmt = (req.get("output_config") or {}).get("format")
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return reply_text(seed, n_tokens)
    text = msgspec.json.encode(example_value(fmt.get("schema"))).decode()
    return text.ljust(n_tokens * CHARS_PER_TOKEN)[: n_tokens * CHARS_PER_TOKEN]


def _server_tools(directives: Directives, searched: int | None) -> dict[str, int] | None:
    """``usage.server_tool_use``: the searches that ran (``searched``; None when the request
    has no search tool, then the ``web_search`` directive's count alone) and the fetches."""
    search = directives.web_search if searched is None else searched
    fetch = directives.web_fetch
    if search is None and fetch is None:
        return None
    return {"web_search_requests": search or 0, "web_fetch_requests": fetch or 0}


def _stop(capped: bool, tool_name: str | None, directives: Directives) -> tuple[str, str | None]:
    if capped:
        return "max_tokens", None
    if tool_name is not None:
        return "tool_use", None
    if directives.refuse:
        return "refusal", None
    if directives.stop is not None:
        return "stop_sequence", directives.stop
    return "end_turn", None


def _blocks(part: Part) -> list[dict[str, Any]]:
    if isinstance(part, SearchPart):
        return [part.use_block({"query": part.query}), part.result_block()]
    return [_block(part)]


def _block(part: ThinkingPart | TextPart | ToolPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        if part.citations is not None:
            return {"type": "text", "text": part.text, "citations": list(part.citations)}
        return {"type": "text", "text": part.text}
    if isinstance(part, ThinkingPart):
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}


def to_message(plan: Plan) -> dict[str, Any]:
    """The non-streamed Messages response for ``plan``."""
    return {
        "id": plan.message_id,
        "type": "message",
        "role": "assistant",
        "model": plan.model,
        "content": [block for p in plan.parts for block in _blocks(p)],
        "stop_reason": plan.stop_reason,
        "stop_sequence": plan.stop_sequence,
        "usage": plan.usage.final(),
    }
