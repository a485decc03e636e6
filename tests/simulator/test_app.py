"""The simulator over HTTP, called with the official Anthropic SDK."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import anthropic
import httpx2
import msgspec
import pytest
from ezat_simulator import stream as stream_mod

from .conftest import REPORTED, Running, StartSim, server_tool_use

# Each test gets its own event loop: the in-process simulator and its client never share a
# loop with the session-wide stacks of other suites.
pytestmark = pytest.mark.asyncio(loop_scope="function")

USER = [{"role": "user", "content": "Hello there"}]
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    },
}


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def test_non_stream_text(sim: Running) -> None:
    msg = await sim.client.messages.create(model="claude-sonnet-5-5", max_tokens=100, messages=USER)
    assert msg.id.startswith("msg_sim_") and msg.model == "claude-sonnet-5-5"
    assert msg.stop_reason == "end_turn"
    (block,) = msg.content
    assert block.type == "text" and len(block.text) == 4 * 12
    assert msg.usage.output_tokens == 12
    assert msg.usage.input_tokens == -(-len("Hello there") // 4)


async def test_stream_text_is_four_characters_per_token(sim: Running) -> None:
    deltas: list[str] = []
    async with sim.client.messages.stream(
        model="m", max_tokens=100, messages=user("count [sim:tokens=30]")
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                deltas.append(event.delta.text)
        final = await stream.get_final_message()
    assert len(deltas) == 30 and all(len(d) == 4 for d in deltas)
    assert final.content[0].text == "".join(deltas)
    assert final.usage.output_tokens == 30 and final.stop_reason == "end_turn"


async def test_max_tokens_caps_the_reply(sim: Running) -> None:
    msg = await sim.client.messages.create(model="m", max_tokens=5, messages=USER)
    assert msg.stop_reason == "max_tokens" and len(msg.content[0].text) == 20


async def test_thinking_non_stream_and_stream(sim: Running) -> None:
    args: dict[str, Any] = {
        "model": "m",
        "max_tokens": 2048,
        "messages": USER,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    msg = await sim.client.messages.create(**args)
    assert [b.type for b in msg.content] == ["thinking", "text"]
    assert len(msg.content[0].thinking) == 32 and msg.content[0].signature
    async with sim.client.messages.stream(**args) as stream:
        final = await stream.get_final_message()
    assert final.content[0].thinking == msg.content[0].thinking
    assert final.content[0].signature == msg.content[0].signature
    assert final.usage.output_tokens == 20


async def test_tool_call(sim: Running) -> None:
    msg = await sim.client.messages.create(
        model="m", max_tokens=200, messages=USER, tools=[WEATHER], tool_choice={"type": "any"}
    )
    (call,) = msg.content
    assert call.type == "tool_use" and call.name == "get_weather"
    assert call.input == {"city": "Oslo", "days": 1}
    assert msg.stop_reason == "tool_use"
    async with sim.client.messages.stream(
        model="m", max_tokens=200, messages=user("[sim:tool=get_weather tokens=2]"), tools=[WEATHER]
    ) as stream:
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"city": "Oslo", "days": 1}


async def test_forced_tool_with_thinking_is_refused(sim: Running) -> None:
    with pytest.raises(anthropic.BadRequestError, match="Thinking may not be enabled"):
        await sim.client.messages.create(
            model="m",
            max_tokens=2048,
            messages=USER,
            tools=[WEATHER],
            tool_choice={"type": "tool", "name": "get_weather"},
            thinking={"type": "enabled", "budget_tokens": 1024},
        )


async def test_server_tool_directives_reach_the_sdk_in_the_final_usage(sim: Running) -> None:
    assert await server_tool_use(sim.client, "m") == REPORTED


@pytest.mark.parametrize(
    ("status", "error", "retry_after"),
    [
        (429, anthropic.RateLimitError, "1"),
        (500, anthropic.InternalServerError, None),
        (529, anthropic.OverloadedError, "1"),
        (400, anthropic.BadRequestError, None),
    ],
)
async def test_status_directive(
    sim: Running, status: int, error: type[anthropic.APIStatusError], retry_after: str | None
) -> None:
    with pytest.raises(error) as err:
        await sim.client.messages.create(
            model="m", max_tokens=10, messages=user(f"[sim:status={status}]")
        )
    assert err.value.status_code == status
    assert err.value.response.headers.get("retry-after") == retry_after
    body = err.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["request_id"] == err.value.response.headers["request-id"]


async def test_echo_makes_the_status_directive_quote_the_prompt(sim: Running) -> None:
    with pytest.raises(anthropic.BadRequestError, match="the request said 'tell no one"):
        await sim.client.messages.create(
            model="m", max_tokens=10, messages=user("tell no one [sim:status=400 echo]")
        )
    with pytest.raises(anthropic.BadRequestError) as plain:
        await sim.client.messages.create(
            model="m", max_tokens=10, messages=user("tell no one [sim:status=400]")
        )
    assert "tell no one" not in plain.value.message


async def test_invalid_request_names_the_field(sim: Running) -> None:
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.0\.content\.0\.type"):
        await sim.client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": [{"type": "video"}]}]
        )


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"x-api-key": ""}, 401),
        ({"authorization": "Basic abc"}, 401),
        ({"authorization": "Bearer "}, 401),
        ({"x-api-key": "anything"}, 200),
        ({"authorization": "Bearer anything"}, 200),
    ],
)
async def test_a_key_is_required(sim: Running, headers: dict[str, str], status: int) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": USER}
    async with sim.http.post(sim.url + "/v1/messages", json=body, headers=headers) as resp:
        assert resp.status == status
        if status == 401:
            assert (await resp.json())["error"]["type"] == "authentication_error"


async def test_body_over_the_limit_is_413(start_sim: StartSim) -> None:
    small = await start_sim(max_body_bytes=1000)
    with pytest.raises(anthropic.APIStatusError) as err:
        await small.client.messages.create(model="m", max_tokens=5, messages=user("x" * 2000))
    assert err.value.status_code == 413
    assert err.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]


async def test_fail_after_sends_an_error_event(sim: Running) -> None:
    texts: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as err:
        async with sim.client.messages.stream(
            model="m", max_tokens=100, messages=user("[sim:fail_after=3]")
        ) as stream:
            async for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    texts.append(event.delta.text)
    assert len(texts) == 3
    assert err.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    (record,) = await sim.requests(1)
    assert record["outcome"] == "error" and record["tokens_sent"] == 3


async def test_fail_after_without_stream_is_500(sim: Running) -> None:
    with pytest.raises(anthropic.InternalServerError):
        await sim.client.messages.create(
            model="m", max_tokens=10, messages=user("[sim:fail_after=1]")
        )


async def test_drop_after_closes_the_connection(sim: Running) -> None:
    texts: list[str] = []
    with pytest.raises((anthropic.APIConnectionError, httpx2.HTTPError)):
        async with sim.client.messages.stream(
            model="m", max_tokens=100, messages=user("[sim:drop_after=2]")
        ) as stream:
            async for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    texts.append(event.delta.text)
    assert len(texts) == 2
    (record,) = await sim.requests(1)
    assert record["outcome"] == "dropped" and record["tokens_sent"] == 2


def _cached_turn(extra_turns: int) -> dict[str, Any]:
    system = [{"type": "text", "text": "rules " * 1000, "cache_control": {"type": "ephemeral"}}]
    messages: list[dict[str, Any]] = []
    for i in range(extra_turns):
        messages += [
            {"role": "user", "content": f"q{i}"},
            {"role": "assistant", "content": f"a{i}"},
        ]
    last = {"type": "text", "text": "question " * 100, "cache_control": {"type": "ephemeral"}}
    messages.append({"role": "user", "content": [last]})
    return {"model": "m", "max_tokens": 10, "system": system, "messages": messages}


async def test_cache_is_written_then_read(sim: Running) -> None:
    first = await sim.client.messages.create(**_cached_turn(0))
    total = await sim.client.messages.count_tokens(
        **{k: v for k, v in _cached_turn(0).items() if k != "max_tokens"}
    )
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation_input_tokens == total.input_tokens == 1500 + 225
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == 1725
    assert first.usage.input_tokens == 0
    again = await sim.client.messages.create(**_cached_turn(0))
    assert (again.usage.cache_read_input_tokens, again.usage.cache_creation_input_tokens) == (
        1725,
        0,
    )
    # The next turn keeps the system prompt and reads it; the new messages are written.
    second = await sim.client.messages.create(**_cached_turn(1))
    assert second.usage.cache_read_input_tokens == 1500
    # "q0" and "a0" add 4 characters: the prefix is ceil((6000 + 4 + 900) / 4) = 1726 tokens.
    assert second.usage.cache_creation_input_tokens == 1726 - 1500
    assert second.usage.input_tokens == 0
    stats = await sim.admin("GET", "/_sim/stats")
    assert stats["cache_entries"] == 3


async def test_cache_is_per_instance_and_reset_clears_it(start_sim: StartSim) -> None:
    a, b = await start_sim(), await start_sim()
    await a.client.messages.create(**_cached_turn(0))
    on_b = await b.client.messages.create(**_cached_turn(0))
    assert on_b.usage.cache_read_input_tokens == 0
    await a.admin("POST", "/_sim/reset")
    after_reset = await a.client.messages.create(**_cached_turn(0))
    assert after_reset.usage.cache_read_input_tokens == 0


async def test_small_prefixes_are_not_cached(start_sim: StartSim) -> None:
    sim = await start_sim(min_cache_tokens=4096)
    for _ in range(2):
        msg = await sim.client.messages.create(**_cached_turn(0))
        assert msg.usage.cache_read_input_tokens == msg.usage.cache_creation_input_tokens == 0
        assert msg.usage.input_tokens == 1725


async def test_minimum_cacheable_prefix_is_per_model(start_sim: StartSim) -> None:
    sim = await start_sim(min_cache_tokens_by_model={"claude-big": 4096})
    for model, cached in [("claude-big", 0), (" Claude-Big ", 0), ("claude-small", 1725)]:
        msg = await sim.client.messages.create(**(_cached_turn(0) | {"model": model}))
        assert msg.usage.cache_creation_input_tokens == cached, model


async def test_faults_hit_the_next_requests(sim: Running) -> None:
    armed = await sim.admin("POST", "/_sim/faults", {"status": 529, "count": 2, "retry_after": 2})
    assert armed["remaining"] == 2 and armed["fault"]["status"] == 529
    for _ in range(2):
        with pytest.raises(anthropic.OverloadedError) as err:
            await sim.client.messages.create(model="m", max_tokens=5, messages=USER)
        assert err.value.response.headers["retry-after"] == "2"
    msg = await sim.client.messages.create(model="m", max_tokens=5, messages=USER)
    assert msg.stop_reason == "max_tokens"
    assert (await sim.admin("GET", "/_sim/faults"))["fault"] is None


async def test_fault_until_cleared(sim: Running) -> None:
    await sim.admin("POST", "/_sim/faults", {"status": 500, "count": -1})
    for _ in range(3):
        with pytest.raises(anthropic.InternalServerError):
            await sim.client.messages.create(model="m", max_tokens=5, messages=USER)
    # count_tokens is not affected.
    counted = await sim.client.messages.count_tokens(model="m", messages=USER)
    assert counted.input_tokens == 3
    await sim.admin("DELETE", "/_sim/faults")
    await sim.client.messages.create(model="m", max_tokens=5, messages=USER)


async def test_fault_delay_and_mid_stream_failure(sim: Running) -> None:
    await sim.admin("POST", "/_sim/faults", {"delay_ms": 50, "fail_after": 1})
    started = asyncio.get_running_loop().time()
    with pytest.raises(anthropic.APIStatusError):
        async with sim.client.messages.stream(model="m", max_tokens=50, messages=USER) as stream:
            await stream.get_final_message()
    assert asyncio.get_running_loop().time() - started >= 0.05


async def test_bad_fault_is_refused(sim: Running) -> None:
    async with sim.http.post(sim.url + "/_sim/faults", json={"status": 200}) as resp:
        assert resp.status == 400
    async with sim.http.post(sim.url + "/_sim/faults", json={"colour": "red"}) as resp:
        assert resp.status == 400


async def test_request_log_shows_headers_body_and_outcome(sim: Running) -> None:
    await sim.client.messages.create(
        model="m", max_tokens=50, messages=USER, extra_headers={"X-Ezat-Session": "s1"}
    )
    await sim.client.messages.count_tokens(model="m", messages=USER)
    first, second = await sim.requests(2)
    assert first["path"] == "/v1/messages" and second["path"] == "/v1/messages/count_tokens"
    assert first["headers"]["authorization"] == "Bearer test-key"
    assert first["headers"]["x-ezat-session"] == "s1"
    assert "anthropic-version" in first["headers"]
    assert first["body"] == {"model": "m", "max_tokens": 50, "messages": USER}
    assert first["outcome"] == "complete" and first["status"] == 200
    assert first["tokens_sent"] == 12 and first["message_id"] == "msg_sim_1"
    assert first["finished_at"] >= first["started_at"]
    assert (await sim.requests(1))[0]["id"] == second["id"]
    stats = await sim.admin("GET", "/_sim/stats")
    assert stats["requests"] == 2 and stats["active"] == 0
    await sim.admin("POST", "/_sim/reset")
    assert await sim.requests() == []


async def test_closing_a_stream_early_is_recorded_as_cancelled(sim: Running) -> None:
    got = 0
    async with sim.client.messages.stream(
        model="m", max_tokens=500, messages=user("[sim:tokens=200 token_ms=20]")
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                got += 1
                if got == 2:
                    break
    for _ in range(100):
        (record,) = await sim.requests(1)
        if record["outcome"] != "active":
            break
        await asyncio.sleep(0.02)
    assert record["outcome"] == "cancelled"
    assert record["cancelled_at"] is not None
    assert 2 <= record["tokens_sent"] < 200
    assert (await sim.admin("GET", "/_sim/stats"))["active"] == 0


async def test_delays_pace_the_stream(start_sim: StartSim) -> None:
    sim = await start_sim(first_token_ms=60, token_ms=10)
    loop = asyncio.get_running_loop()
    started = loop.time()
    stamps: list[float] = []
    async with sim.client.messages.stream(
        model="m", max_tokens=50, messages=user("[sim:tokens=5]")
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                stamps.append(loop.time() - started)
    assert stamps[0] >= 0.06
    assert stamps[-1] - stamps[0] >= 0.04


async def test_long_pauses_send_pings(sim: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_mod, "PING_EVERY_MS", 20.0)
    body = {
        "model": "m",
        "max_tokens": 10,
        "stream": True,
        "messages": user("[sim:tokens=1 first_token_ms=70]"),
    }
    async with sim.http.post(sim.url + "/v1/messages", json=body, headers={"x-api-key": "k"}) as r:
        text = await r.text()
    names = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
    assert names[:2] == ["message_start", "content_block_start"]
    assert names.count("ping") == 3  # 70 ms of pause: pings at 20, 40 and 60 ms
    assert names[-1] == "message_stop"


async def test_drop_without_stream_closes_the_connection(sim: Running) -> None:
    with pytest.raises(anthropic.APIConnectionError):
        await sim.client.messages.create(
            model="m", max_tokens=10, messages=user("[sim:drop_after=1]")
        )
    (record,) = await sim.requests(1)
    assert record["outcome"] == "dropped" and record["tokens_sent"] == 0


async def test_a_client_giving_up_on_a_slow_reply_is_recorded(sim: Running) -> None:
    body = {"model": "m", "max_tokens": 10, "messages": user("[sim:first_token_ms=5000]")}
    with pytest.raises(asyncio.TimeoutError):
        async with sim.http.post(
            sim.url + "/v1/messages",
            json=body,
            headers={"x-api-key": "k"},
            timeout=aiohttp.ClientTimeout(total=0.1),
        ):
            pass
    for _ in range(100):
        (record,) = await sim.requests(1)
        if record["outcome"] != "active":
            break
        await asyncio.sleep(0.02)
    assert record["outcome"] == "cancelled" and record["status"] == 499


# ---- misbehaviour that is not an error answer (issue 13) ---------------------------------------


async def raw_exchange(sim: Running, body: dict[str, Any], wait: float = 0.5) -> tuple[bytes, bool]:
    """What a raw HTTP/1.1 client receives within ``wait`` s, and whether the connection is still
    open then (the simulator neither answered in full nor closed)."""
    host, port = sim.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    data = msgspec.json.encode(body)
    writer.write(
        b"POST /v1/messages HTTP/1.1\r\nHost: sim\r\nx-api-key: k\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(data) + data
    )
    got = b""
    still_open = False
    try:
        async with asyncio.timeout(wait):
            while chunk := await reader.read(65536):
                got += chunk
    except TimeoutError:
        still_open = True
    writer.close()
    return got, still_open


def body_of(text: str, stream: bool) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 50, "stream": stream, "messages": user(text)}


async def settled(sim: Running, n: int) -> list[dict[str, Any]]:
    """The last ``n`` request-log entries once none of them is active any more."""
    for _ in range(50):
        records = await sim.requests(n)
        if all(r["outcome"] != "active" for r in records):
            return records
        await asyncio.sleep(0.02)
    raise AssertionError(records)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("how", ["fault", "directive"])
async def test_never_answer_keeps_the_connection_and_sends_nothing(
    sim: Running, stream: bool, how: str
) -> None:
    text = "hi [sim:never_answer]" if how == "directive" else "hi"
    if how == "fault":
        await sim.admin("POST", "/_sim/faults", {"never_answer": True})
    got, still_open = await raw_exchange(sim, body_of(text, stream))
    assert (got, still_open) == (b"", True)
    [record] = await settled(sim, 1)
    assert record["outcome"] == "cancelled"  # the client gave up


@pytest.mark.parametrize("stream", [False, True])
async def test_html_fault_is_a_200_html_page(sim: Running, stream: bool) -> None:
    await sim.admin("POST", "/_sim/faults", {"html": True, "count": 2})
    async with sim.http.post(
        sim.url + "/v1/messages", json=body_of("hi", stream), headers={"x-api-key": "k"}
    ) as resp:
        assert resp.status == 200
        assert resp.headers["content-type"].startswith("text/html")
        assert (await resp.text()).startswith("<!DOCTYPE html>")
    # The directive does the same.
    async with sim.http.post(
        sim.url + "/v1/messages", json=body_of("[sim:html]", stream), headers={"x-api-key": "k"}
    ) as resp:
        assert resp.headers["content-type"].startswith("text/html")
    assert [r["outcome"] for r in await sim.requests(2)] == ["html", "html"]


async def test_stall_after_sends_k_tokens_then_nothing_with_the_connection_open(
    sim: Running,
) -> None:
    await sim.admin("POST", "/_sim/faults", {"stall_after": 2})
    got, still_open = await raw_exchange(sim, body_of("[sim:tokens=10]", True))
    assert still_open
    assert got.count(b"event: content_block_delta") == 2
    assert b"message_stop" not in got and b"event: ping" not in got
    assert not got.endswith(b"0\r\n\r\n")  # the chunked body never ends
    [record] = await settled(sim, 1)
    assert (record["outcome"], record["tokens_sent"]) == ("cancelled", 2)
    # The directive, and a JSON answer: the headers and half the body, then nothing.
    got, still_open = await raw_exchange(sim, body_of("[sim:stall_after=0]", False))
    head, _, part = got.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    assert still_open and b" 200 OK" in head and 0 < len(part) < length


@pytest.mark.parametrize("stream", [False, True])
async def test_stall_before_start_sends_the_headers_only(sim: Running, stream: bool) -> None:
    await sim.admin("POST", "/_sim/faults", {"stall_before_start": True})
    got, still_open = await raw_exchange(sim, body_of("hi", stream))
    head, _, rest = got.partition(b"\r\n\r\n")
    assert still_open and b" 200 OK" in head and rest == b""
    kind = b"text/event-stream" if stream else b"application/json"
    assert kind in head


async def test_bad_stall_fault_is_refused(sim: Running) -> None:
    async with sim.http.post(sim.url + "/_sim/faults", json={"stall_after": -1}) as resp:
        assert resp.status == 400


# ---- Claude Code's mid-conversation system messages (issue 16) ------------------------------

STEERED = [
    {"role": "user", "content": "look it up"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sun"}],
    },
    {"role": "system", "content": "Answer briefly.", "output_config": {"effort": "low"}},
]
CLAUDE_CODE_BETAS = ["mid-conversation-system-2026-04-07", "per-turn-control-2026-07-01"]


async def test_system_role_messages_are_answered_under_claude_codes_betas(sim: Running) -> None:
    msg = await sim.client.beta.messages.create(
        model="m",
        max_tokens=50,
        messages=STEERED,
        betas=CLAUDE_CODE_BETAS,  # type: ignore[arg-type]
    )
    assert msg.stop_reason == "end_turn" and msg.content[0].type == "text"
    count = await sim.client.beta.messages.count_tokens(
        model="m",
        messages=STEERED,
        betas=CLAUDE_CODE_BETAS,  # type: ignore[arg-type]
    )
    assert count.input_tokens == msg.usage.input_tokens > 0
    (logged, _) = (await sim.requests())[-2:]
    assert logged["body"]["messages"][3]["role"] == "system"


async def test_system_role_messages_are_refused_without_the_beta(sim: Running) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        await sim.client.messages.create(
            model="m",
            max_tokens=50,
            messages=STEERED,  # type: ignore[arg-type]
        )
    assert "messages.3.role: Input should be 'user' or 'assistant'" in str(err.value)
