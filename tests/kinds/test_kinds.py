"""Deployments of every kind through the five real processes, with the official SDKs as clients
(docs/routing.md, "Deployment kinds"): each kind's answers, streams and counts, the exact request
each face received, betas moved or dropped, a wrong AWS secret, and one pool of all three."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import aiohttp
import anthropic
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import BEDROCK_API_KEY, BEDROCK_ID, PROJECT, TOKEN_LIFETIME, VERTEX_ID, Kinds

# model -> (the deployment that serves it, the face that receives it, the path it asks for)
ONE_KIND = {
    "anthropic-only": ("only-anthropic", "anthropic", "/v1/messages"),
    "bedrock-only": ("only-bedrock", "bedrock", f"/model/{BEDROCK_ID}/invoke"),
    "bedrock-messages": ("only-bedrock-messages", "bedrock", "/anthropic/v1/messages"),
    "bedrock-key": ("only-bedrock-key", "bedrock", f"/model/{BEDROCK_ID}/invoke"),
    "vertex-only": (
        "only-vertex",
        "vertex",
        f"/v1/projects/{PROJECT}/locations/us-east5/publishers/anthropic/models/{VERTEX_ID}"
        ":rawPredict",
    ),
}
STREAM_PATHS = {
    "bedrock-only": f"/model/{BEDROCK_ID}/invoke-with-response-stream",
    "bedrock-key": f"/model/{BEDROCK_ID}/invoke-with-response-stream",
    "vertex-only": ONE_KIND["vertex-only"][2].replace(":rawPredict", ":streamRawPredict"),
}
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def _rid() -> dict[str, str]:
    return {"x-request-id": f"kinds-{uuid.uuid4().hex[:16]}"}


async def _last(gw: Kinds, face: str, request_id: str) -> dict[str, Any]:
    """The face's record of the request ``request_id`` (the gateway sends it on)."""
    for record in reversed(await gw.received(face, 20)):
        if record["headers"].get("x-request-id") == request_id:
            return record
    raise AssertionError(f"{face} never received {request_id}")


def _auth_of(model: str, record: dict[str, Any]) -> None:
    """Each kind's credentials, as its face checked them (a refused one is a 403 there)."""
    auth = record["headers"].get("authorization", "")
    if model == "anthropic-only":
        assert record["headers"]["x-api-key"] == "sim-key" and not auth
    elif model == "bedrock-key":
        assert auth == f"Bearer {BEDROCK_API_KEY}"
    elif model.startswith("bedrock"):
        assert auth.startswith("AWS4-HMAC-SHA256 Credential=")
        assert "/us-east-1/bedrock/aws4_request" in auth
    else:
        assert auth.startswith("Bearer ") and auth != f"Bearer {BEDROCK_API_KEY}"


def _body_of(model: str, body: dict[str, Any], stream: bool) -> None:
    """What each kind's body holds beside the client's fields (docs/routing.md)."""
    if model == "anthropic-only":
        assert body["model"] == "claude-sonnet-5-5" and "anthropic_version" not in body
        assert body.get("stream", False) is stream
    elif model == "bedrock-messages":
        assert body["model"] == BEDROCK_ID and body["anthropic_version"] == "bedrock-2023-05-31"
        assert body.get("stream", False) is stream
    elif model.startswith("bedrock"):
        assert "model" not in body and "stream" not in body
        assert body["anthropic_version"] == "bedrock-2023-05-31"
    else:
        assert "model" not in body and body["anthropic_version"] == "vertex-2023-10-16"
        assert body.get("stream", False) is stream


@pytest.mark.parametrize("model", list(ONE_KIND))
async def test_every_kind_answers_the_anthropic_sdk_and_gets_its_own_wire(
    gw: Kinds, model: str
) -> None:
    deployment, face, path = ONE_KIND[model]
    headers = _rid()
    raw = await gw.anthropic().messages.with_raw_response.create(
        model=model,
        max_tokens=64,
        system="be brief",
        messages=[{"role": "user", "content": "hello there"}],
        extra_headers=headers,
    )
    message = await raw.parse()
    assert raw.headers["x-ezat-deployment"] == deployment
    assert message.model == model  # the client's name, whatever the kind calls it
    assert message.content[0].type == "text" and message.content[0].text
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    record = await _last(gw, face, headers["x-request-id"])
    assert record["path"] == path and record["status"] == 200
    _auth_of(model, record)
    _body_of(model, record["body"], stream=False)
    assert record["body"]["system"] == "be brief"
    assert record["body"]["messages"] == [{"role": "user", "content": "hello there"}]


@pytest.mark.parametrize("model", list(ONE_KIND))
async def test_every_kind_streams_thinking_and_a_tool_call(gw: Kinds, model: str) -> None:
    deployment, face, path = ONE_KIND[model]
    headers = _rid()
    async with gw.anthropic().messages.stream(
        model=model,
        max_tokens=256,
        tools=[WEATHER],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "weather in Oslo? [sim:think tool=get_weather]"}],
        extra_headers=headers,
    ) as stream:
        texts = [t async for t in stream.text_stream]
        final = await stream.get_final_message()
    assert texts == [] or all(isinstance(t, str) for t in texts)
    kinds_of = [block.type for block in final.content]
    assert kinds_of[0] == "thinking" and kinds_of[-1] == "tool_use"
    tool = final.content[-1]
    assert tool.type == "tool_use" and tool.name == "get_weather" and tool.input == {"city": "Oslo"}
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 0
    record = await _last(gw, face, headers["x-request-id"])
    assert record["path"] == STREAM_PATHS.get(model, path) and record["status"] == 200
    _body_of(model, record["body"], stream=True)
    assert deployment  # served by its one deployment (no other is configured for the model)


@pytest.mark.parametrize("model", list(ONE_KIND))
async def test_every_kind_streams_to_the_openai_sdk(gw: Kinds, model: str) -> None:
    chunks = await gw.openai().chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "count to three"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    async for chunk in chunks:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    assert text and finish == "stop"
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0


async def test_count_tokens_on_every_kind_matches_the_anthropic_deployment(gw: Kinds) -> None:
    messages = [{"role": "user", "content": "how many tokens is this sentence, roughly?"}]
    counts = {}
    for model in ONE_KIND:
        counted = await gw.anthropic().messages.count_tokens(
            model=model,
            system="you count",
            messages=messages,  # type: ignore[arg-type]
        )
        counts[model] = counted.input_tokens
    assert counts["anthropic-only"] > 0
    assert set(counts.values()) == {counts["anthropic-only"]}, counts
    bedrock = (await gw.received("bedrock", 5))[-1]
    assert bedrock["path"] == f"/model/{BEDROCK_ID}/count-tokens"


async def test_betas_are_moved_into_the_bedrock_body_or_dropped_where_refused(gw: Kinds) -> None:
    beta = "context-1m-2025-08-07, made-up-beta-2099-01-01"
    seen: dict[str, dict[str, Any]] = {}
    for model in ("anthropic-only", "bedrock-only", "vertex-only"):
        headers = {**_rid(), "anthropic-beta": beta}
        await gw.anthropic().messages.create(
            model=model,
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers=headers,
        )
        seen[model] = await _last(gw, ONE_KIND[model][1], headers["x-request-id"])
    anth = seen["anthropic-only"]
    assert anth["headers"]["anthropic-beta"] == "context-1m-2025-08-07,made-up-beta-2099-01-01"
    bedrock = seen["bedrock-only"]
    assert bedrock["body"]["anthropic_beta"] == ["context-1m-2025-08-07"]
    assert "anthropic-beta" not in bedrock["headers"]
    vertex = seen["vertex-only"]
    assert vertex["headers"].get("anthropic-beta") == "context-1m-2025-08-07"
    assert "anthropic_beta" not in vertex["body"]


async def test_a_wrong_aws_secret_fails_over_to_another_kind_and_the_client_never_sees_it(
    gw: Kinds,
) -> None:
    served = []
    for i in range(12):
        raw = await gw.anthropic().messages.with_raw_response.create(
            model="bad-signature",
            max_tokens=8,
            messages=[{"role": "user", "content": f"request {i}"}],
            extra_headers={**_rid(), "x-ezat-session": f"bad-sig-{uuid.uuid4().hex}"},
        )
        await raw.parse()
        served.append(raw.headers["x-ezat-deployment"])
    assert set(served) == {"bad-fallback"}
    refused = [r for r in await gw.received("bedrock", 100) if r["status"] == 403]
    # Refused by the face (the signature was recomputed there) until the breaker opened: the
    # deployment is then left alone (breaker_failures = 3).
    assert 1 <= len(refused) <= 3


async def _ask(gw: Kinds, session: str, text: str) -> tuple[str, anthropic.types.Message]:
    raw = await gw.anthropic().messages.with_raw_response.create(
        model="one-of-each",
        max_tokens=16,
        system=[{"type": "text", "text": "rules " * 1000, "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": text}],
        extra_headers={**_rid(), "x-ezat-session": session},
    )
    return raw.headers["x-ezat-deployment"], await raw.parse()


FACE_OF = {"mix-anthropic": "anthropic", "mix-bedrock": "bedrock", "mix-vertex": "vertex"}


async def test_a_mixed_pool_keeps_a_session_home_and_moves_it_once_when_the_home_fails(
    gw: Kinds,
) -> None:
    session = f"mixed-{uuid.uuid4().hex}"
    homes = [await _ask(gw, session, f"turn {i}") for i in range(4)]
    home = homes[0][0]
    assert {name for name, _ in homes} == {home}
    # The prompt cache lives on the home: the first turn writes it, the next ones read it.
    assert homes[0][1].usage.cache_creation_input_tokens
    assert all(m.usage.cache_read_input_tokens for _, m in homes[1:])
    await gw.faults(FACE_OF[home], status=529, count=1000)
    moved = [await _ask(gw, session, f"after {i}") for i in range(4)]
    new_home = moved[0][0]
    assert new_home != home and {name for name, _ in moved} == {new_home}
    # The move costs the cache once (another kind keeps another cache), then it is read again.
    assert moved[0][1].usage.cache_read_input_tokens == 0
    assert moved[0][1].usage.cache_creation_input_tokens
    assert all(m.usage.cache_read_input_tokens for _, m in moved[1:])
    # The old home recovers; the session stays where its cache now is.
    await gw.faults(FACE_OF[home])
    stayed = [await _ask(gw, session, f"later {i}") for i in range(2)]
    assert {name for name, _ in stayed} == {new_home}
    assert all(m.usage.cache_read_input_tokens for _, m in stayed)


async def test_the_usage_row_keeps_the_kind_and_the_deployment_price(gw: Kinds) -> None:
    """only-bedrock has its own price (4 / 20 USD per million); the model's is 3 / 15."""
    rows = {}
    for model in ("bedrock-only", "vertex-only"):
        headers = _rid()
        await gw.anthropic().messages.create(
            model=model,
            max_tokens=32,
            messages=[{"role": "user", "content": "price me"}],
            extra_headers=headers,
        )
        rows[model] = await gw.row(headers["x-request-id"])
    bedrock, vertex = rows["bedrock-only"], rows["vertex-only"]
    assert (bedrock["deployment"], bedrock["deployment_kind"]) == ("only-bedrock", "bedrock")
    assert (vertex["deployment"], vertex["deployment_kind"]) == ("only-vertex", "vertex")
    assert bedrock["region"] == vertex["region"] == "eu"  # the routing region
    for row, (inp, out) in ((bedrock, (4, 20)), (vertex, (3, 15))):
        # Integer micro-dollars: tokens x USD per million, rounded once (docs/billing.md).
        exact = row["input_tokens"] * inp + row["output_tokens"] * out
        assert row["cost_micros"] == exact, (row["cost_micros"], exact)


async def test_a_vertex_token_expiring_mid_run_is_refreshed_with_no_failed_request(
    gw: Kinds,
) -> None:
    before = (await gw.stats("vertex"))["tokens_issued"]
    started = time.monotonic()
    answered = 0
    while time.monotonic() - started < TOKEN_LIFETIME * 2.5:
        message = await gw.anthropic().messages.create(
            model="vertex-only",
            max_tokens=8,
            messages=[{"role": "user", "content": "still there?"}],
        )
        assert message.content
        answered += 1
        await asyncio.sleep(0.2)
    assert answered >= 20
    # Two lifetimes passed: the router fetched new tokens in the background at least twice, and
    # not one request was refused for an expired one.
    assert (await gw.stats("vertex"))["tokens_issued"] - before >= 2
    refused = [r for r in await gw.received("vertex", 200) if r["status"] == 401]
    assert refused == []


async def test_the_router_exports_how_long_each_signing_credential_has_left(gw: Kinds) -> None:
    """After the refresh test: the Vertex token was refreshed and is fresh; the Bedrock
    deployments' shared-file credentials have no expiry, so no seconds-left series, and static
    keys have no series at all (docs/observability.md, "Router")."""
    async with aiohttp.ClientSession() as s, s.get(gw.metrics_url) as r:
        families = {f.name: f for f in text_string_to_metric_families(await r.text())}
    left = {
        s.labels["deployment"]: s.value
        for s in families["ezat_router_credential_seconds_left"].samples
    }
    assert set(left) == {"only-vertex", "mix-vertex"}
    assert all(0 < v <= TOKEN_LIFETIME for v in left.values()), left
    refreshes = {
        (s.labels["deployment"], s.labels["outcome"]): s.value
        for s in families["ezat_router_credential_refreshes"].samples
        if s.name.endswith("_total")
    }
    assert refreshes[("only-vertex", "ok")] >= 2 and refreshes[("only-vertex", "failed")] == 0
    assert ("bad-bedrock", "ok") in refreshes  # signed, with a credential that never expires
    assert not any(name == "only-anthropic" or name == "only-bedrock-key" for name, _ in refreshes)


async def test_a_bedrock_throttle_before_the_first_byte_fails_over(gw: Kinds) -> None:
    await gw.faults("bedrock", bedrock_exception="ThrottlingException", count=50)
    session = f"throttle-{uuid.uuid4().hex}"
    served = []
    try:
        for i in range(6):
            name, message = await _ask(gw, session, f"throttled {i}")
            served.append(name)
            assert message.content
    finally:  # the face is the package's: the faults left armed would throttle later tests
        await gw.faults("bedrock")
    assert "mix-bedrock" not in served  # throttled there: rested, the others answered


async def test_a_bedrock_throttle_mid_stream_ends_with_the_api_error_event_and_no_charge(
    gw: Kinds,
) -> None:
    await gw.faults("bedrock", bedrock_exception="throttlingException", fail_after=3, count=1)
    headers = _rid()
    with pytest.raises(anthropic.APIStatusError) as caught:
        async with gw.anthropic().messages.stream(
            model="bedrock-only",
            max_tokens=64,
            messages=[{"role": "user", "content": "a long answer please"}],
            extra_headers=headers,
        ) as stream:
            async for _ in stream.text_stream:
                pass
    assert "rate_limit" in str(caught.value.body) or caught.value.status_code == 429
    row = await gw.row(headers["x-request-id"])
    assert row["status"] == "failed" and row["cost_micros"] == 0
