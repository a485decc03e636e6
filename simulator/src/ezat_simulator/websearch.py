"""Anthropic's web search server tool, simulated (pure; no I/O, no clock, no network).

A request whose ``tools`` holds a web search tool (``type`` in ``SEARCH_TYPES``, the versions the
``anthropic`` SDK knows) is answered as the API answers one: per search a ``server_tool_use``
block (``srvtoolu_...``, ``input: {"query": ...}``) and a ``web_search_tool_result`` block, then
the reply's text, its second half cited (``web_search_result_location``) from the first result;
``usage.server_tool_use.web_search_requests`` counts the searches that ran.

The rule (deterministic): the model searches once whenever the tool is present and
``tool_choice`` is not ``none``; ``[sim:web_search=N]`` asks for N searches (0: none). Over the
tool's ``max_uses`` the next search's result is the ``max_uses_exceeded`` error, not billed, and
the model searches no more. The query is the last user message's first words (directives left
out), numbered from the second search on; the results derive from the query alone: three pages
from a fixed pool of sites (or from ``allowed_domains``), less ``blocked_domains``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .tokens import tokens_for_chars

SEARCH_TYPES = frozenset({"web_search_20250305", "web_search_20260209", "web_search_20260318"})
RESULTS_PER_SEARCH = 3
QUERY_WORDS = 8
CITED_TEXT_CHARS = 150  # the API cites at most 150 characters of a page
_SITES = (
    "en.wikipedia.org",
    "docs.python.org",
    "developer.mozilla.org",
    "www.bbc.com",
    "arxiv.org",
    "github.com",
    "stackoverflow.com",
    "www.nature.com",
)
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_DIRECTIVES = re.compile(r"\[sim:[^\]]*\]")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class SearchPart:
    """One search: the ``server_tool_use`` block and its ``web_search_tool_result``."""

    id: str
    query: str
    content: Any  # a list of web_search_result blocks, or the error object

    @property
    def json(self) -> str:
        return msgspec.json.encode({"query": self.query}).decode()

    @property
    def tokens(self) -> int:
        """The call's output tokens: its input JSON, as a client tool call's."""
        return tokens_for_chars(len(self.json))

    def use_block(self, input_: Any) -> dict[str, Any]:
        return {"type": "server_tool_use", "id": self.id, "name": "web_search", "input": input_}

    def result_block(self) -> dict[str, Any]:
        return {"type": "web_search_tool_result", "tool_use_id": self.id, "content": self.content}


def search_tool(req: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The request's web search tool, if it has one."""
    for tool in req.get("tools") or ():
        if isinstance(tool, Mapping) and tool.get("type") in SEARCH_TYPES:
            return tool
    return None


# Tools the API runs itself. Anthropic-defined client tools (bash, text editor, computer use)
# are called with tool_use blocks as custom ones are.
SERVER_TOOL_PREFIXES = ("web_search_", "web_fetch_", "code_execution_")


def is_server_tool(tool: Any) -> bool:
    """A tool the API runs itself: never returned as a client ``tool_use``."""
    return isinstance(tool, Mapping) and str(tool.get("type", "")).startswith(SERVER_TOOL_PREFIXES)


def searches_wanted(req: Mapping[str, Any], asked: int | None) -> int:
    """How many searches the simulated model runs (``asked``: the ``web_search`` directive)."""
    if search_tool(req) is None:
        return 0
    choice = req.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "none":
        return 0
    return 1 if asked is None else asked


def _digest(text: str, size: int = 8) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=size).digest()


def _opaque(text: str) -> str:
    """A stable stand-in for the API's encrypted strings (base64, as theirs)."""
    return base64.b64encode(_digest(text, 48)).decode()


def _matches(domain: str, rule: str) -> bool:
    rule = rule.lower().removeprefix("https://").removeprefix("http://").split("/")[0]
    return domain == rule or domain.endswith("." + rule)


def results_for(query: str, tool: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``web_search_result`` blocks a search for ``query`` finds under ``tool``'s filters."""
    allowed: Sequence[str] = tool.get("allowed_domains") or ()
    blocked: Sequence[str] = tool.get("blocked_domains") or ()
    pool = [d.lower() for d in allowed] or list(_SITES)
    start = int.from_bytes(_digest(query), "big") % len(pool)
    picked = [pool[(start + i) % len(pool)] for i in range(min(RESULTS_PER_SEARCH, len(pool)))]
    slug = _NOT_SLUG.sub("-", query.lower()).strip("-")[:60] or "search"
    results = []
    for n, domain in enumerate(picked):
        if any(_matches(domain, rule) for rule in blocked):
            continue
        age = int.from_bytes(_digest(query + domain), "big")
        results.append(
            {
                "type": "web_search_result",
                "url": f"https://{domain}/{slug}" + (f"-{n + 1}" if n else ""),
                "title": f"{query} | {domain}",
                "encrypted_content": _opaque("content " + query + domain),
                "page_age": f"{_MONTHS[age % 12]} {1 + age % 28}, 2026",
            }
        )
    return results


def citation(result: Mapping[str, Any], query: str) -> dict[str, Any]:
    """A ``web_search_result_location`` citing ``result``."""
    cited = f"{result['title']}: what the page says about {query}."
    return {
        "type": "web_search_result_location",
        "url": result["url"],
        "title": result["title"],
        "encrypted_index": _opaque("index " + result["url"]),
        "cited_text": cited[:CITED_TEXT_CHARS],
    }


def query_of(text: str, n: int) -> str:
    """The ``n``-th search's query (0-based) for the last user message ``text``."""
    words = _DIRECTIVES.sub(" ", text).split()[:QUERY_WORDS]
    base = " ".join(words) or "simulated search"
    return base if n == 0 else f"{base} ({n + 1})"


def plan_searches(
    req: Mapping[str, Any], wanted: int, seq: int, text: str
) -> tuple[list[SearchPart], int, dict[str, Any] | None]:
    """The searches, how many ran (billed), and the citation the answer carries (or None)."""
    tool = search_tool(req)
    if tool is None or wanted <= 0:
        return [], 0, None
    max_uses = tool.get("max_uses")
    parts: list[SearchPart] = []
    cite: dict[str, Any] | None = None
    for n in range(wanted):
        part_id = f"srvtoolu_sim_{seq}_{n + 1}"
        query = query_of(text, n)
        if isinstance(max_uses, int) and n >= max_uses:
            error = {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
            parts.append(SearchPart(part_id, query, error))
            break  # the model is told it may search no more
        results = results_for(query, tool)
        parts.append(SearchPart(part_id, query, results))
        if cite is None and results:
            cite = citation(results[0], query)
    ran = sum(1 for p in parts if isinstance(p.content, list))
    return parts, ran, cite


def check_tool(tool: Mapping[str, Any], path: str) -> str | None:
    """What the API refuses in a web search tool's definition, as ``path: problem``."""
    if tool.get("name") != "web_search":
        return f"{path}.name: Input should be 'web_search'"
    max_uses = tool.get("max_uses")
    if max_uses is not None and (
        not isinstance(max_uses, int) or isinstance(max_uses, bool) or max_uses < 1
    ):
        return f"{path}.max_uses: Input should be greater than or equal to 1"
    for key in ("allowed_domains", "blocked_domains"):
        value = tool.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(d, str) for d in value)
        ):
            return f"{path}.{key}: Input should be a valid list of strings"
    if tool.get("allowed_domains") and tool.get("blocked_domains"):
        return f"{path}: use either allowed_domains or blocked_domains, not both"
    return None
