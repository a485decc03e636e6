"""Stored responses through the stack (docs/responses.md, "Stored responses"): store true keeps
a response, previous_response_id continues from it (thinking included), GET returns it, DELETE
removes it, and another key sees none of it."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from .conftest import Gateway
from .test_responses import MODEL, WEATHER, _thinking_sent


async def test_previous_response_id_carries_a_tool_loop_and_its_thinking(
    gateway: Gateway,
) -> None:
    """Each turn sends only what is new; the deployment refuses a tool turn whose thinking is
    missing, so completed turns prove the stored conversation came back whole."""
    client = gateway.openai()
    resp = await client.responses.create(
        model=MODEL,
        input="Weather? [sim:tool=get_weather]",
        tools=[WEATHER],
        reasoning={"effort": "low"},
    )
    for turn in range(1, 4):
        [call] = [o for o in resp.output if o.type == "function_call"]
        again = "[sim:tool=get_weather]" if turn < 3 else "done"
        resp = await client.responses.create(
            model=MODEL,
            previous_response_id=resp.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": again}],
            tools=[WEATHER],
            reasoning={"effort": "low"},
        )
        assert resp.status == "completed" and resp.previous_response_id is not None
        sent = (await gateway.sent_for(resp))["body"]
        assert "Weather?" in json.dumps(sent["messages"][0]["content"])
        assert len(_thinking_sent(sent)) == turn
    assert resp.output_text and not [o for o in resp.output if o.type == "function_call"]


async def test_get_returns_the_response_and_delete_removes_it(gateway: Gateway) -> None:
    client = gateway.openai()
    made = await client.responses.create(model=MODEL, input="Say hello.")
    got = await client.responses.retrieve(made.id)
    assert got.model_dump() == made.model_dump()
    deleted = await client.responses.with_raw_response.delete(made.id)
    assert deleted.status_code == 200
    assert json.loads(deleted.text) == {"id": made.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError) as err:
        await client.responses.create(model=MODEL, previous_response_id=made.id, input="again")
    body: Any = err.value.body
    assert (body["param"], body["code"]) == ("previous_response_id", "previous_response_not_found")


async def test_store_false_keeps_nothing(gateway: Gateway) -> None:
    client = gateway.openai()
    made = await client.responses.create(model=MODEL, input="Say hello.", store=False)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(made.id)


async def test_another_key_cannot_see_continue_or_delete_it(gateway: Gateway, new_key: Any) -> None:
    client = gateway.openai()
    made = await client.responses.create(model=MODEL, input="Say hello.")
    other = gateway.openai(api_key=await new_key("tenant-b"))
    with pytest.raises(openai.NotFoundError) as err:
        await other.responses.retrieve(made.id)
    body: Any = err.value.body
    assert body["message"] == (
        f"No response with id {made.id!r} found for this API key; it was not stored "
        "(store: false), was deleted, or expired (responses are kept 30 days)"
    )
    with pytest.raises(openai.NotFoundError):
        await other.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError) as err:
        await other.responses.create(model=MODEL, previous_response_id=made.id, input="hi")
    body = err.value.body
    assert body["message"] == (
        f"previous_response_id: no stored response {made.id!r} for this API key; it was not "
        "stored (store: false), was deleted, or expired (responses are kept 30 days)"
    )
    # Still the owner's.
    assert (await client.responses.retrieve(made.id)).id == made.id


async def test_a_streamed_response_is_stored_before_its_completed_event(gateway: Gateway) -> None:
    client = gateway.openai()
    async with client.responses.stream(model=MODEL, input="Say hello.") as stream:
        async for event in stream:
            if event.type == "response.completed":
                # The next turn may be sent the moment this event arrives.
                got = await client.responses.retrieve(event.response.id)
                assert got.output_text == event.response.output_text


async def test_a_stateless_turn_continues_a_stored_one_and_keeps_nothing(gateway: Gateway) -> None:
    """``store: false`` with ``previous_response_id``: the stored turns are read (off the
    translate subscription, app.py) and sent with the new one; the new response is not kept."""
    client = gateway.openai()
    made = await client.responses.create(model=MODEL, input="Remember the word marmalade.")
    follow = await client.responses.create(
        model=MODEL, previous_response_id=made.id, input="Which word?", store=False
    )
    assert follow.status == "completed" and follow.previous_response_id == made.id
    messages = (await gateway.sent_for(follow))["body"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert "marmalade" in json.dumps(messages[0]) and "Which word?" in json.dumps(messages[2])
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(follow.id)
