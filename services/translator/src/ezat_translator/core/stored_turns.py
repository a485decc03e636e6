"""What a stored response keeps of its turn (docs/responses.md, "Stored responses"): the
canonical Messages turns the translation used, never the client's raw items.

A turn is ``{"role": "user" | "assistant" | "system", "content": [blocks]}``: the Messages blocks
the request's own input became (a ``system`` turn holds the text its system and developer
messages added to the system prompt), then the assistant turn of the answer. Thinking is kept
only sealed: each run of thinking blocks that came from one reasoning item is one
``{"type": "ezat_sealed_thinking", "data": <encrypted_content>}`` block, opened again when a
continuation reads it; a web search and its results likewise, sealed as its web_search_call's
id (web_search.py). What the translation dropped (unknown fields, empty text, reasoning items
without content, refusals) is not there, so a row grows with what the model saw, not with what
the client sent.

Pure: no I/O. ``canonical`` and ``assistant_turn`` make turns; ``responses_items`` reads them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .responses_tools import flat_name
from .web_search import ID_PREFIX, SEALED_ID_PREFIX

SEALED = "ezat_sealed_thinking"

_decode_json = msgspec.json.Decoder().decode


def canonical(blocks: list[dict[str, Any]], sealed: dict[int, tuple[str, int]]) -> list[Any]:
    """``blocks`` with each run of opened thinking blocks back as its one sealed block."""
    out: list[dict[str, Any]] = []
    skip = 0
    for block in blocks:
        if skip:
            skip -= 1
            continue
        found = sealed.get(id(block))
        if found is not None:
            out.append({"type": SEALED, "data": found[0]})
            skip = found[1] - 1
        else:
            out.append(block)
    return out


def assistant_turn(output: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The answer's turn from a response's ``output`` items: text, tool calls (by their flat
    name, as the translation names tools) and sealed thinking, in the model's order."""
    blocks: list[dict[str, Any]] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text" and part.get("text"):
                    blocks.append({"type": "text", "text": part["text"]})
        elif kind in ("function_call", "custom_tool_call"):
            name = flat_name(item.get("namespace"), item.get("name", ""))
            if kind == "custom_tool_call":
                arguments: Any = {"input": item.get("input", "")}
            else:
                arguments = _arguments(item.get("arguments", ""))
            blocks.append(
                {
                    "type": "tool_use",
                    "id": item.get("call_id", ""),
                    "name": name,
                    "input": arguments,
                }
            )
        elif kind == "reasoning" and item.get("encrypted_content"):
            blocks.append({"type": SEALED, "data": item["encrypted_content"]})
        elif kind == "web_search_call" and str(item.get("id")).startswith(SEALED_ID_PREFIX):
            blocks.append({"type": SEALED, "data": item["id"][len(ID_PREFIX) :]})
    return {"role": "assistant", "content": blocks} if blocks else None


def _arguments(text: str) -> dict[str, Any]:
    # A call cut by the output limit has arguments that are not JSON: the model gets {} back.
    try:
        value = _decode_json(text) if text.strip() else {}
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}
