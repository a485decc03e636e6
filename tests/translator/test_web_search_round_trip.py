"""A web search sent back (stateless, docs/responses.md "Web search"): a ``web_search_call``
whose id the gateway sealed gives the next turn its ``server_tool_use`` and
``web_search_tool_result`` blocks again, ``encrypted_content`` included; a call without such an
id (the Codex CLI sends none back) is dropped, its answer's text kept; a forged or another
tenant's id is a 400 naming it. Sealing is the real one (core/sealing.py)."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ezat_common.errors import GatewayError
from ezat_translator.core.anthropic_to_responses import ResponseMeta, to_response
from ezat_translator.core.responses_items import FOREIGN_SEARCH
from ezat_translator.core.responses_to_anthropic import (
    decode_responses_request,
    translate_request,
)
from ezat_translator.core.sealing import FOREIGN, Sealer
from ezat_translator.core.stored_turns import SEALED, assistant_turn

from .openai_to_anthropic_support import CATALOGUE

ANSWER = Path(__file__).parent / "golden" / "web_search_output" / "search_and_cited_answer"
SEALER = Sealer([("k1", bytes(32))])
RANDOM = random.Random(31)  # encrypted content does not compress: random bytes stand in
META = ResponseMeta(request_id="req_1", response_model="test/plain", created_at=1)


def opener(tenant: str) -> Any:
    def open_reasoning(blob: str, path: str) -> list[dict[str, Any]]:
        return SEALER.open(tenant, blob, f"{path}.encrypted_content") or []

    return open_reasoning


def answer(tenant: str = "key_a") -> dict[str, Any]:
    body = (ANSWER / "in.json").read_bytes()
    out: dict[str, Any] = msgspec.json.decode(
        to_response(body, META, lambda blocks: SEALER.seal(tenant, blocks))
    )
    return out


def next_turn(output: list[dict[str, Any]], tenant: str = "key_a", **more: Any) -> Any:
    body = {
        "model": "test/plain",
        "tools": [{"type": "web_search"}],
        "input": [
            {"type": "message", "role": "user", "content": "What changed in Python 3.14?"},
            *output,
            {"type": "message", "role": "user", "content": "Tell me more."},
        ],
        **more,
    }
    return translate_request(
        decode_responses_request(msgspec.json.encode(body)),
        CATALOGUE,
        session_header=None,
        cache_header=None,
        open_reasoning=opener(tenant),
    )


def assistant_blocks(translation: Any) -> list[dict[str, Any]]:
    messages = msgspec.json.decode(msgspec.json.encode(translation.body))["messages"]
    (assistant,) = [m for m in messages if m["role"] == "assistant"]
    blocks: list[dict[str, Any]] = assistant["content"]
    return blocks


def test_the_items_sent_back_give_the_search_and_its_results_back() -> None:
    original = json.loads((ANSWER / "in.json").read_text())["content"]
    blocks = assistant_blocks(next_turn(answer()["output"]))
    # The sealed blocks are Anthropic's own, encrypted_content included; the text comes back
    # from the message items (its citations are not needed: the results are there), the answer's
    # three text blocks after the search as the one message they were sent as.
    assert blocks[1:3] == original[1:3]
    assert blocks[2]["content"][0]["encrypted_content"].startswith("EqgfCio")
    assert [b["type"] for b in blocks] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert blocks[3]["text"] == "".join(b["text"] for b in original[3:])


def test_the_codex_cli_s_items_have_no_id_and_are_dropped() -> None:
    output = answer()["output"]
    codex = [
        {k: v for k, v in item.items() if k != "id"} if item["type"] == "web_search_call" else item
        for item in output
    ]
    blocks = assistant_blocks(next_turn(codex))
    assert [b["type"] for b in blocks] == ["text"] * 2  # the messages before and after the search


def test_another_service_s_id_is_dropped() -> None:
    item = {"type": "web_search_call", "id": "ws_68a1c0", "status": "completed", "action": {}}
    assistant = {"type": "message", "role": "assistant", "content": "It is sunny."}
    blocks = assistant_blocks(next_turn([item, assistant]))
    assert blocks == "It is sunny."  # one text block is sent as a string


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda item_id: item_id[:-4] + "AAAA", id="altered"),
        pytest.param(lambda item_id: item_id[:40], id="cut"),
    ],
)
def test_an_altered_id_is_refused_naming_it(change: Any) -> None:
    output = answer()["output"]
    output[1]["id"] = change(output[1]["id"])
    with pytest.raises(GatewayError) as info:
        next_turn(output)
    assert (info.value.status, info.value.param) == (400, "input[2].id")
    assert info.value.message == f"input[2].id: {FOREIGN_SEARCH}"


def test_another_tenant_s_search_is_refused() -> None:
    with pytest.raises(GatewayError) as info:
        next_turn(answer("key_b")["output"], tenant="key_a")
    assert info.value.message == f"input[2].id: {FOREIGN_SEARCH}"


def test_sealed_blocks_of_one_kind_do_not_pass_as_the_other() -> None:
    search_id = answer()["output"][1]["id"]
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": search_id[3:]}
    with pytest.raises(GatewayError) as info:
        next_turn([reasoning])
    assert info.value.message == f"input[1].encrypted_content: {FOREIGN}"
    thinking = SEALER.seal("key_a", [{"type": "thinking", "thinking": "t", "signature": "s"}])
    call = {"type": "web_search_call", "id": f"ws_{thinking}", "status": "completed"}
    with pytest.raises(GatewayError) as info:
        next_turn([call])
    assert info.value.message == f"input[1].id: {FOREIGN_SEARCH}"


def test_a_stored_response_keeps_the_search_sealed() -> None:
    output = answer()["output"]
    turn = assistant_turn(output)
    assert turn is not None
    assert [b["type"] for b in turn["content"]] == ["text", SEALED, "text"]
    assert turn["content"][1]["data"] == output[1]["id"][3:]


def test_a_continuation_gives_the_stored_search_back() -> None:
    """previous_response_id: the stored turn's sealed search is opened again (as the
    translator's store opener does: a key since removed drops it, never a 400)."""
    output = answer()["output"]
    stored = assistant_turn(output)
    assert stored is not None
    earlier = [{"role": "user", "content": [{"type": "text", "text": "What changed?"}]}, stored]
    body = {"model": "test/plain", "input": "Tell me more.", "previous_response_id": "resp_1"}
    translation = translate_request(
        decode_responses_request(msgspec.json.encode(body)),
        CATALOGUE,
        session_header=None,
        cache_header=None,
        open_reasoning=opener("key_a"),
        earlier=earlier,
        open_stored=lambda blob, path: SEALER.open("key_a", blob, path, unknown_drops=True) or [],
    )
    original = json.loads((ANSWER / "in.json").read_text())["content"]
    assert assistant_blocks(translation)[1:3] == original[1:3]


def test_the_sealed_id_s_size() -> None:
    """docs/responses.md quotes this: the id of a search of five results, each with 1,500
    characters of encrypted_content (what Anthropic sends is of that order)."""
    results = [
        {
            "type": "web_search_result",
            "url": f"https://site{k}.example/a/long/path/to/page-{k}.html",
            "title": f"A page title of some length, number {k}",
            "encrypted_content": base64.b64encode(RANDOM.randbytes(1125)).decode(),  # 1,500
            "page_age": "2 days ago",
        }
        for k in range(5)
    ]
    body = {
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": results},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    out = msgspec.json.decode(
        to_response(msgspec.json.encode(body), META, lambda b: SEALER.seal("key_a", b))
    )
    size = len(out["output"][0]["id"])
    raw = len(msgspec.json.encode(body["content"]))
    # base64 of the compressed blocks: the results' base64 compresses to about 3/4, and is
    # base64-encoded again: about the size of the blocks' JSON.
    assert raw * 0.9 < size < raw * 1.1, (raw, size)
