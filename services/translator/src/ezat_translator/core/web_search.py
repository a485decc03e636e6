"""Web search in both OpenAI APIs: Anthropic's web search server tool (docs/responses.md and
docs/api.md, "Web search").

- Request: a Responses ``web_search`` / ``web_search_preview`` tool, or Chat's
  ``web_search_options``, becomes the server tool ``web_search_20250305``. ``max_uses`` comes from
  ``search_context_size`` (``MAX_USES``: how many searches one answer may run, the closest thing
  Anthropic offers to OpenAI's "how much context"); ``filters.allowed_domains`` become
  ``allowed_domains``; ``user_location`` is passed on (Chat nests it under ``approximate``).
  OpenAI offers no blocked domains, so none are sent.
- Answer: a ``server_tool_use`` block and its ``web_search_tool_result`` are one
  ``web_search_call`` item (``action: {"type": "search", "query", "sources"}``); a text block's
  ``citations`` are ``url_citation`` annotations spanning that block's text.
- Round trip: the item's ``id`` is ``ws_`` + the two blocks sealed (sealing.py), so a client that
  sends the item back unchanged gives the deployment its search results again (with their
  ``encrypted_content``, which Anthropic needs for citations across turns).

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.errors import invalid
from ezat_common.web_search_types import OPENAI_SEARCH_TYPES

TOOL_TYPE = "web_search_20250305"
TOOL_NAME = "web_search"
# search_context_size -> max_uses; OpenAI's default size is medium.
MAX_USES = {"low": 1, "medium": 3, "high": 5}
DEFAULT_SIZE = "medium"
ID_PREFIX = "ws_"
SEALED_ID_PREFIX = "ws_ezs1."  # ws_ + sealing.PREFIX: an id this gateway sealed
BLOCK_TYPES = ("server_tool_use", "web_search_tool_result")
_LOCATION_FIELDS = ("city", "region", "country", "timezone")


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(path, "must be an object")
    return value


def _domains(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise invalid(path, 'must be a list of domain names, such as ["example.com"]')
    for k, domain in enumerate(value):
        if "://" in domain:  # Anthropic refuses a scheme; say so here, naming the entry
            raise invalid(f"{path}[{k}]", f"must be a domain name without a scheme; got {domain!r}")
    return list(value)


def _max_uses(size: Any, path: str) -> int:
    if size is None:
        size = DEFAULT_SIZE
    if size not in MAX_USES:
        raise invalid(path, f'must be "low", "medium" or "high"; got {size!r}')
    return MAX_USES[size]


def _location(raw: Any, path: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    loc = _object(raw, path)
    kind = loc.get("type", "approximate")
    if kind != "approximate":
        raise invalid(f"{path}.type", f'must be "approximate"; got {kind!r}')
    out: dict[str, Any] = {"type": "approximate"}
    for name in _LOCATION_FIELDS:
        value = loc.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise invalid(f"{path}.{name}", "must be a string")
        if name == "country" and (len(value) != 2 or not value.isalpha()):
            # Anthropic takes ISO 3166-1 alpha-2 codes only, as OpenAI documents them.
            raise invalid(
                f"{path}.country",
                f'must be a two-letter ISO 3166-1 country code, such as "GB"; got {value!r}',
            )
        out[name] = value
    return out


def server_tool(
    max_uses: int, domains: list[str] | None, location: dict[str, Any] | None
) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": TOOL_TYPE, "name": TOOL_NAME, "max_uses": max_uses}
    if domains:
        tool["allowed_domains"] = domains
    if location is not None:
        tool["user_location"] = location
    return tool


def responses_tool(raw: dict[str, Any], path: str) -> dict[str, Any]:
    """A Responses ``web_search`` or ``web_search_preview`` tool as the server tool."""
    domains = None
    filters = raw.get("filters")
    if filters is not None:
        allowed = _object(filters, f"{path}.filters").get("allowed_domains")
        if allowed is not None:
            domains = _domains(allowed, f"{path}.filters.allowed_domains")
    max_uses = _max_uses(raw.get("search_context_size"), f"{path}.search_context_size")
    location = _location(raw.get("user_location"), f"{path}.user_location")
    return server_tool(max_uses, domains, location)


def chat_tool(options: Any) -> dict[str, Any]:
    """Chat's ``web_search_options`` as the server tool."""
    path = "web_search_options"
    opts = _object(options, path)
    max_uses = _max_uses(opts.get("search_context_size"), f"{path}.search_context_size")
    location = None
    raw = opts.get("user_location")
    if raw is not None:
        loc = _object(raw, f"{path}.user_location")
        kind = loc.get("type", "approximate")
        if kind != "approximate":
            raise invalid(f"{path}.user_location.type", f'must be "approximate"; got {kind!r}')
        inner = loc.get("approximate") or {}
        location = _location(inner, f"{path}.user_location.approximate")
    return server_tool(max_uses, None, location)


# ---- the answer -----------------------------------------------------------------------------


def url_citation(citation: Any, start: int, end: int) -> dict[str, Any] | None:
    """One Anthropic citation as a Responses ``url_citation`` (None: not a web citation)."""
    if not isinstance(citation, dict) or not isinstance(citation.get("url"), str):
        return None
    title = citation.get("title")
    return {
        "type": "url_citation",
        "start_index": start,
        "end_index": end,
        "title": title if isinstance(title, str) else "",
        "url": citation["url"],
    }


def url_citations(citations: list[Any] | None, start: int, end: int) -> list[dict[str, Any]]:
    """A text block's citations, each spanning the block's text ``[start, end)``."""
    out = [url_citation(c, start, end) for c in citations or ()]
    return [a for a in out if a is not None]


def chat_annotation(annotation: dict[str, Any]) -> dict[str, Any]:
    """A Responses url_citation in Chat's form (the fields nested under ``url_citation``)."""
    return {
        "type": "url_citation",
        "url_citation": {k: annotation[k] for k in ("end_index", "start_index", "title", "url")},
    }


def use_block(block_id: str, name: str, tool_input: Any) -> dict[str, Any]:
    return {"type": "server_tool_use", "id": block_id, "name": name, "input": tool_input or {}}


def streamed_use_block(
    block_id: str, name: str, tool_input: Any, pieces: list[str]
) -> dict[str, Any]:
    """A streamed server_tool_use block: its input is its JSON pieces joined, if any came
    (``{}`` if they do not decode: the search still shows, without its query)."""
    if pieces:
        try:
            tool_input = msgspec.json.decode("".join(pieces))
        except msgspec.DecodeError:
            tool_input = {}
    return use_block(block_id, name, tool_input)


def result_block(tool_use_id: str, content: Any) -> dict[str, Any]:
    return {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": content}


def search_item(item_id: str, use: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The ``web_search_call`` item of one search: ``failed`` when its result is an error."""
    tool_input = use.get("input")
    query = tool_input.get("query") if isinstance(tool_input, dict) else None
    content = result.get("content")
    action: dict[str, Any] = {"type": "search"}
    if isinstance(query, str):
        action["query"] = query
    if isinstance(content, list):
        action["sources"] = [
            {"type": "url", "url": r["url"]}
            for r in content
            if isinstance(r, dict) and isinstance(r.get("url"), str)
        ]
    return {
        "id": item_id,
        "type": "web_search_call",
        "status": "completed" if isinstance(content, list) else "failed",
        "action": action,
    }


def sealed_blocks(blocks: list[dict[str, Any]]) -> bool:
    """``blocks`` are what a web_search_call's id seals: one search and its result."""
    return [b.get("type") for b in blocks] == list(BLOCK_TYPES)


# ---- a model without the tool ---------------------------------------------------------------

# The router's 400 for a server tool no deployment of the model runs (router
# core/server_tools.py): it names the Messages body's ``tools.N.type``, not what the client sent.
UNAVAILABLE_CODE = "server_tool_unavailable"


def responses_search_param(tools: list[dict[str, Any]] | None) -> str | None:
    """``tools[i].type`` of the client's web search tool (at most one: ``to_tools``), if any."""
    for i, raw in enumerate(tools or ()):
        if isinstance(raw, dict) and raw.get("type") in OPENAI_SEARCH_TYPES:
            return f"tools[{i}].type"
    return None


CHAT_PARAM = "web_search_options"


def unavailable_message(param: str, model: str, remove: str) -> str:
    """The router's refusal, naming ``param`` (what the client sent) instead of the upstream
    tool; ``remove``: what the client should drop."""
    return (
        f"{param}: web search is not available for model `{model}` on any of its deployments "
        f"(none of them has a web search server tool); remove {remove}, or use a model served "
        "by an anthropic or vertex deployment."
    )
