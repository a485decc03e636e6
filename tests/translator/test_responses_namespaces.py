"""``namespace`` tools (the Codex CLI's ``multi_agent_v1``): flattened to ``{ns}__{name}`` on the
way in, declared names and namespaces on the way out (core/responses_tools.py)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from ezat_common.errors import GatewayError
from ezat_translator.core.anthropic_to_responses import ResponseMeta, to_response
from ezat_translator.core.responses_stream import ResponsesStream
from ezat_translator.core.responses_tools import CUSTOM_SCHEMA, namespaced
from support.responses_sse import accumulate, responses_events

from .responses_request_support import output, request, translate, user

SPAWN = {
    "type": "function",
    "name": "spawn_agent",
    "description": "Starts a sub-agent",
    "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
}
NOTE = {"type": "custom", "name": "note"}
AGENTS = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents",
    "tools": [SPAWN, NOTE],
}
FLAT = "multi_agent_v1__spawn_agent"


def test_namespace_tools_become_flat_anthropic_tools() -> None:
    tr = translate(request(tools=[{"type": "function", "name": "f"}, AGENTS]))
    assert tr.body["tools"] == [
        {"name": "f", "input_schema": {"type": "object", "properties": {}}},
        {
            "name": FLAT,
            "description": "Sub-agents\n\nStarts a sub-agent",
            "input_schema": SPAWN["parameters"],
        },
        {
            "name": "multi_agent_v1__note",
            "description": "Sub-agents",
            "input_schema": CUSTOM_SCHEMA,
        },
    ]
    assert tr.custom_tools == ["multi_agent_v1__note"]
    assert namespaced([AGENTS]) == {
        FLAT: ("multi_agent_v1", "spawn_agent"),
        "multi_agent_v1__note": ("multi_agent_v1", "note"),
    }


def test_a_call_sent_back_with_its_namespace_is_the_flat_tool_use() -> None:
    call = {
        "type": "function_call",
        "call_id": "c1",
        "name": "spawn_agent",
        "namespace": "multi_agent_v1",
        "arguments": '{"task": "x"}',
    }
    tr = translate(request(tools=[AGENTS], input=[user("go"), call, output("c1")]))
    [tool_use] = tr.body["messages"][1]["content"]
    assert (tool_use["name"], tool_use["input"]) == (FLAT, {"task": "x"})


@pytest.mark.parametrize(
    ("tools", "param", "message"),
    [
        (
            [{**AGENTS, "tools": [{"type": "web_search"}]}],
            "tools[0].tools[0].type",
            'tools[0].tools[0].type: must be "function" or "custom"; got \'web_search\'',
        ),
        (
            [{**AGENTS, "name": "n" * 40, "tools": [{**SPAWN, "name": "s" * 30}]}],
            "tools[0].tools[0].name",
            f"tools[0].tools[0].name: {'n' * 40}__{'s' * 30} is longer than the 64 characters a "
            "tool name may have here; use shorter namespace or tool names",
        ),
    ],
    ids=["inner_built_in", "too_long"],
)
def test_a_wrong_namespace_tool_is_named(tools: Any, param: str, message: str) -> None:
    with pytest.raises(GatewayError) as err:
        translate(request(tools=tools))
    assert (err.value.param, err.value.message) == (param, message)


META = ResponseMeta(
    request_id="r1", response_model="m", created_at=1, namespaced=namespaced([AGENTS])
)
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": FLAT, "input": {"task": "x"}}


def test_a_call_comes_out_in_its_namespace() -> None:
    body = {
        "type": "message",
        "content": [TOOL_USE],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    out = msgspec.json.decode(to_response(msgspec.json.encode(body), META))
    [item] = out["output"]
    assert (item["name"], item["namespace"]) == ("spawn_agent", "multi_agent_v1")


def _event(value: dict[str, Any]) -> bytes:
    return f"event: {value['type']}\ndata: ".encode() + msgspec.json.encode(value) + b"\n\n"


def test_a_streamed_call_comes_out_in_its_namespace_and_the_sdk_reads_it() -> None:
    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    start.update(model="m", usage={"input_tokens": 3, "output_tokens": 0})
    sse = b"".join(
        _event(e)
        for e in (
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": {**TOOL_USE, "input": {}}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"task": "x"}'},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 2},
            },
            {"type": "message_stop"},
        )
    )
    stream = ResponsesStream(META)
    out = stream.feed(sse) + stream.final()
    added = [e for e in responses_events(out) if e["type"] == "response.output_item.added"]
    assert (added[0]["item"]["name"], added[0]["item"]["namespace"]) == (
        "spawn_agent",
        "multi_agent_v1",
    )
    final, _ = accumulate(out)
    assert final is not None
    [call] = final.output
    assert call.type == "function_call" and call.namespace == "multi_agent_v1"
    assert call.name == "spawn_agent"


# ---- custom (freeform) tools come back as custom_tool_call items -----------------------------

CUSTOM_META = ResponseMeta(
    request_id="r2",
    response_model="m",
    created_at=1,
    namespaced=namespaced([AGENTS]),
    custom_tools=frozenset({"patch", "multi_agent_v1__note"}),
)


@pytest.mark.parametrize(
    ("name", "tool_input", "expected"),
    [
        ("patch", {"input": "*** Begin Patch"}, {"name": "patch", "input": "*** Begin Patch"}),
        (
            "multi_agent_v1__note",
            {"input": "x"},
            {"name": "note", "input": "x", "namespace": "multi_agent_v1"},
        ),
        ("patch", {"other": 1}, {"name": "patch", "input": '{"other":1}'}),
    ],
    ids=["plain", "namespaced", "not_one_string"],
)
def test_a_custom_tools_call_is_a_custom_tool_call_item(
    name: str, tool_input: dict[str, Any], expected: dict[str, Any]
) -> None:
    body = {
        "type": "message",
        "content": [{"type": "tool_use", "id": "toolu_9", "name": name, "input": tool_input}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    out = msgspec.json.decode(to_response(msgspec.json.encode(body), CUSTOM_META))
    [item] = out["output"]
    assert item == {
        "id": "ctc_toolu_9",
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "toolu_9",
        **expected,
    }


def test_a_streamed_custom_call_sends_its_text_whole_and_the_sdk_reads_it() -> None:
    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    start.update(model="m", usage={"input_tokens": 3, "output_tokens": 0})
    use = {"type": "tool_use", "id": "toolu_9", "name": "patch", "input": {}}
    sse = b"".join(
        _event(e)
        for e in (
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": use},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"input": "*** Be'},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": 'gin Patch"}'},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 2},
            },
            {"type": "message_stop"},
        )
    )
    stream = ResponsesStream(CUSTOM_META)
    out = stream.feed(sse) + stream.final()
    kinds = [e["type"] for e in responses_events(out)]
    assert kinds[2:] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    final, _ = accumulate(out)
    assert final is not None
    [call] = final.output
    assert call.type == "custom_tool_call" and call.input == "*** Begin Patch"
