"""Every API is one entry of the translator's table (apis.py): each ``ClientRequest.api`` has
one, and each entry hands the one request path its Messages request and the conversion its
replies go through (None: Messages, whose replies go straight to the edge)."""

from __future__ import annotations

import time
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ezat_common.catalogue import Catalogue
from ezat_common.config import load_config
from ezat_common.envelopes import Api, ClientRequest
from ezat_common.redis_keys import RedisKeys
from ezat_translator import apis
from ezat_translator.conversions import ChatConversion, ResponsesConversion
from ezat_translator.responses_requests import ResponsesRequests
from ezat_translator.thinking_store import ThinkingStore

CONFIG = Path(__file__).parents[2] / "config" / "ezat.toml"
CATALOGUE = Catalogue(load_config(str(CONFIG)))
MODEL = "claude-sonnet-5-5"
USER = [{"role": "user", "content": "hi"}]
BODIES: dict[Api, dict[str, Any]] = {
    "messages": {"model": MODEL, "max_tokens": 5, "stream": True, "messages": USER},
    "count_tokens": {"model": MODEL, "messages": USER},
    "chat": {"model": MODEL, "stream": True, "messages": USER},
    "responses": {"model": MODEL, "stream": True, "input": "hi"},
}
CONVERSIONS: dict[Api, type | None] = {
    "messages": None,
    "count_tokens": None,
    "chat": ChatConversion,
    "responses": ResponsesConversion,
}


def table() -> typing.Mapping[Api, apis.Entry]:
    # No Redis: every kept thinking block is gone.
    thinking = ThinkingStore(None, RedisKeys("api-table"))
    return apis.table(CATALOGUE, thinking, ResponsesRequests(CATALOGUE))


def request(api: Api, body: bytes) -> ClientRequest:
    return ClientRequest(
        request_id="req-1",
        uid="uid-1",
        api=api,
        key_id="key-1",
        reply_to="_INBOX.edge.1",
        received_at=time.time(),
        body=body,
        session="s-1",
    )


def test_the_table_has_one_entry_per_api() -> None:
    entries = table()
    assert set(entries) == set(typing.get_args(Api))
    # count_tokens is an endpoint of the Messages API, not an API of its own.
    assert entries["count_tokens"] is entries["messages"]
    assert len({id(entry) for entry in entries.values()}) == 3


@pytest.mark.parametrize("large", [False, True], ids=["on-loop", "off-loop"])
@pytest.mark.parametrize("api", typing.get_args(Api))
async def test_each_entry_gives_the_messages_request_and_its_conversion(
    api: Api, large: bool
) -> None:
    body = msgspec.json.encode(BODIES[api])
    tr, conv = await table()[api].translate(request(api, body), body, large)
    expected = CONVERSIONS[api]
    if expected is None:
        assert conv is None
    else:
        assert type(conv) is expected
    assert tr.model.id == "anthropic/claude-sonnet-5-5"
    assert (tr.response_model, tr.stream) == (MODEL, api != "count_tokens")
    assert tr.session_key == "s-1"
    assert tr.image_urls == [] and tr.restore_thinking is None
    if conv is None:
        # The Messages API's body goes on as the client sent it, less what the route carries.
        assert tr.body is not None
        assert msgspec.json.decode(tr.body)["messages"] == USER
    else:
        # The OpenAI APIs' body is built, then encoded once its images are in.
        assert tr.body is None and tr.data is not None
        assert tr.data["messages"][0]["role"] == "user"


async def test_chat_restores_thinking_only_for_tool_turns_that_asked_for_it() -> None:
    turns = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    tool = {"type": "function", "function": {"name": "f"}}
    chat = table()["chat"]
    for effort, restores in [(None, False), ("low", True)]:
        fields: dict[str, Any] = {"model": MODEL, "messages": turns, "tools": [tool]}
        if effort is not None:
            fields["reasoning_effort"] = effort
        body = msgspec.json.encode(fields)
        tr, _ = await chat.translate(request("chat", body), body, False)
        assert tr.data is not None
        assert ("thinking" in tr.data) is restores
        if tr.restore_thinking is None:
            assert not restores
            continue
        # The tool turn's thinking is gone: restoring turns thinking off for this turn.
        await tr.restore_thinking()
        assert "thinking" not in tr.data
