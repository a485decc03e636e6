"""The simulator's Bedrock face, called with the official clients unchanged: boto3's
``bedrock-runtime`` client and the ``anthropic`` SDK's Bedrock clients (simulator/README.md,
"Bedrock face").

boto3 is synchronous and the simulator runs in this test's event loop, so every boto3 call runs
in a worker thread (``_call``).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anthropic
import boto3
import botocore.auth
import pytest
import pytest_asyncio
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError
from ezat_simulator.sigv4 import AwsCredential, BedrockAuth
from support.clients import track

from .conftest import REPORTED, Running, StartSim, server_tool_use

pytestmark = pytest.mark.asyncio(loop_scope="function")

KEY_ID, SECRET, API_KEY = "AKIDSIMULATOR", "sim-secret-key", "bedrock-api-key-1"
TOKEN_KEY_ID, TOKEN = "ASIATEMPORARY", "session-token-1"
AUTH = BedrockAuth(
    credentials=(
        AwsCredential(KEY_ID, SECRET),
        AwsCredential(TOKEN_KEY_ID, SECRET, TOKEN),
    ),
    api_keys=(API_KEY,),
)
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
ARN = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
VERSION = "bedrock-2023-05-31"


def invoke_body(text: str = "Hello there", **extra: Any) -> dict[str, Any]:
    return {
        "anthropic_version": VERSION,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


@pytest_asyncio.fixture(loop_scope="function")
async def bedrock(start_sim: StartSim) -> Running:
    return await start_sim(bedrock=AUTH)


def runtime(url: str, key_id: str = KEY_ID, secret: str = SECRET, token: str | None = None) -> Any:
    # No retries: an armed fault must surface as the error, not be retried away. Synchronous, so
    # closing it at the end of the test (``track``) does not need this test's event loop.
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=Config(retries={"total_max_attempts": 1}, read_timeout=15),
    )
    return track(client)


async def _call(fn: Callable[..., Any], **kwargs: Any) -> Any:
    return await asyncio.to_thread(fn, **kwargs)


async def invoke(url: str, body: Any, model: str = MODEL, **client: Any) -> dict[str, Any]:
    raw = json.dumps(body) if not isinstance(body, bytes) else body
    resp = await _call(runtime(url, **client).invoke_model, modelId=model, body=raw)
    return {"meta": resp["ResponseMetadata"], "body": json.loads(resp["body"].read())}


async def stream_events(url: str, body: dict[str, Any], model: str = MODEL) -> list[Any]:
    """Every event boto3 decodes from the stream, Anthropic events as dicts; an exception event
    ends the list with boto3's error."""
    resp = await _call(
        runtime(url).invoke_model_with_response_stream, modelId=model, body=json.dumps(body)
    )

    def drain() -> list[Any]:
        out: list[Any] = []
        try:
            for event in resp["body"]:
                out.append(json.loads(event["chunk"]["bytes"]))
        except EventStreamError as exc:
            out.append(exc)
        return out

    return await asyncio.to_thread(drain)


def error_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int, str]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Message"]


# ---- answers ----------------------------------------------------------------------------------


async def test_invoke_answers_what_the_anthropic_face_answers(bedrock: Running) -> None:
    got = await invoke(bedrock.url, invoke_body())
    same = await bedrock.client.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Hello there"}]
    )
    body = got["body"]
    assert body["model"] == MODEL and body["stop_reason"] == "end_turn"
    assert body["content"] == [{"type": "text", "text": same.content[0].text}]
    assert body["usage"]["output_tokens"] == 12
    headers = got["meta"]["HTTPHeaders"]
    assert headers["x-amzn-bedrock-output-token-count"] == "12"
    assert headers["x-amzn-bedrock-input-token-count"] == str(body["usage"]["input_tokens"])


async def test_the_request_log_keeps_the_invoke_body_as_received(bedrock: Running) -> None:
    sent = invoke_body(anthropic_beta=["interleaved-thinking-2025-05-14"])
    await invoke(bedrock.url, sent, model=ARN)
    (record,) = await bedrock.requests(1)
    assert record["path"] == f"/model/{ARN}/invoke"
    assert record["body"] == sent  # anthropic_version and anthropic_beta kept, no model added
    assert record["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDSIM")
    assert record["outcome"] == "complete"


async def test_an_arn_model_id_is_answered_under_its_name(bedrock: Running) -> None:
    got = await invoke(bedrock.url, invoke_body(), model=ARN)
    assert got["body"]["model"] == ARN


async def test_the_stream_is_event_stream_frames_boto3_decodes(bedrock: Running) -> None:
    events = await stream_events(bedrock.url, invoke_body("hi [sim:tokens=5]"))
    kinds = [e["type"] for e in events]
    assert kinds == ["message_start", "content_block_start"] + ["content_block_delta"] * 5 + [
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    whole = await invoke(bedrock.url, invoke_body("hi [sim:tokens=5]"))
    assert text == whole["body"]["content"][0]["text"]
    metrics = events[-1]["amazon-bedrock-invocationMetrics"]
    assert metrics["outputTokenCount"] == 5
    assert metrics["inputTokenCount"] == events[0]["message"]["usage"]["input_tokens"]
    assert {"invocationLatency", "firstByteLatency"} <= metrics.keys()


async def test_the_stream_response_head_is_bedrocks(bedrock: Running) -> None:
    resp = await _call(
        runtime(bedrock.url).invoke_model_with_response_stream,
        modelId=MODEL,
        body=json.dumps(invoke_body()),
    )
    headers = resp["ResponseMetadata"]["HTTPHeaders"]
    assert headers["content-type"] == "application/vnd.amazon.eventstream"
    assert resp["contentType"] == "application/json"  # X-Amzn-Bedrock-Content-Type
    await asyncio.to_thread(lambda: list(resp["body"]))


async def test_count_tokens_counts_what_the_anthropic_face_counts(bedrock: Running) -> None:
    body = invoke_body("Count these words, please, all of them")
    resp = await _call(
        runtime(bedrock.url).count_tokens,
        modelId=MODEL,
        input={"invokeModel": {"body": json.dumps(body).encode()}},
    )
    same = await bedrock.client.messages.count_tokens(model=MODEL, messages=body["messages"])
    assert resp["inputTokens"] == same.input_tokens > 0
    record, _ = await bedrock.requests(2)
    assert record["path"] == f"/model/{MODEL}/count-tokens"
    blob = record["body"]["input"]["invokeModel"]["body"]
    assert json.loads(base64.b64decode(blob)) == body  # botocore sends the blob as base64


@pytest.mark.parametrize("model", [f"us.{MODEL}", f"global.{MODEL}", ARN])
async def test_count_tokens_refuses_an_inference_profile_as_bedrock_does(
    bedrock: Running, model: str
) -> None:
    """boto3 raises the ValidationException real Bedrock answers for a profile; the same id
    still invokes."""
    body = invoke_body("Count these words")
    with pytest.raises(ClientError) as exc:
        await _call(
            runtime(bedrock.url).count_tokens,
            modelId=model,
            input={"invokeModel": {"body": json.dumps(body).encode()}},
        )
    assert isinstance(exc.value, runtime(bedrock.url).exceptions.ValidationException)
    assert error_of(exc) == (
        "ValidationException",
        400,
        "The provided model doesn't support counting tokens.",
    )
    assert (await invoke(bedrock.url, body, model=model))["body"]["type"] == "message"


# ---- Bedrock's body rules -------------------------------------------------------------------

REFUSED = [
    ({"model": MODEL}, "Malformed input request: #: extraneous key [model] is not permitted"),
    ({"stream": True}, "Malformed input request: #: extraneous key [stream] is not permitted"),
    ({"anthropic_version": "vertex-2023-10-16"}, "#/anthropic_version: vertex-2023-10-16 is not"),
    ({"anthropic_beta": ["mcp-servers-2025-12-04"]}, "invalid beta flag"),
    ({"max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
]


@pytest.mark.parametrize(("change", "message"), REFUSED)
async def test_bedrocks_body_rules_refuse(
    bedrock: Running, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ClientError) as exc:
        await invoke(bedrock.url, {**invoke_body(), **change})
    code, status, text = error_of(exc)
    assert (code, status) == ("ValidationException", 400)
    assert text.startswith(message) or message in text


async def test_anthropic_version_is_required(bedrock: Running) -> None:
    body = invoke_body()
    del body["anthropic_version"]
    with pytest.raises(ClientError) as exc:
        await invoke(bedrock.url, body)
    assert error_of(exc)[2] == (
        "Malformed input request: #: required key [anthropic_version] not found, please "
        "reformat your input and try again."
    )


# ---- faults -----------------------------------------------------------------------------------

FAULTS = [
    ({"status": 429}, "ThrottlingException", 429),
    ({"status": 500}, "InternalServerException", 500),
    ({"status": 503}, "ServiceUnavailableException", 503),
    ({"status": 529}, "ServiceUnavailableException", 503),
    ({"status": 408}, "ModelTimeoutException", 408),
    ({"status": 400}, "ValidationException", 400),
    ({"status": 403}, "AccessDeniedException", 403),
    ({"bedrock_exception": "ModelNotReadyException"}, "ModelNotReadyException", 429),
    ({"bedrock_exception": "ServiceQuotaExceededException"}, "ServiceQuotaExceededException", 400),
    ({"bedrock_exception": "throttlingException"}, "ThrottlingException", 429),
]


@pytest.mark.parametrize(("fault", "code", "status"), FAULTS)
async def test_faults_answer_bedrocks_errors(
    bedrock: Running, fault: dict[str, Any], code: str, status: int
) -> None:
    await bedrock.admin("POST", "/_sim/faults", fault)
    with pytest.raises(ClientError) as exc:
        await invoke(bedrock.url, invoke_body())
    assert error_of(exc)[:2] == (code, status)


async def test_a_throttling_exception_mid_stream_surfaces_as_boto3s_error(bedrock: Running) -> None:
    await bedrock.admin(
        "POST", "/_sim/faults", {"bedrock_exception": "throttlingException", "fail_after": 2}
    )
    events = await stream_events(bedrock.url, invoke_body())
    *chunks, error = events
    assert isinstance(error, EventStreamError)
    assert error.response["Error"]["Code"] == "throttlingException"
    deltas = [e for e in chunks if e["type"] == "content_block_delta"]
    assert len(deltas) == 2 and not any(e["type"] == "message_stop" for e in chunks)
    (record,) = await bedrock.requests(1)
    assert record["outcome"] == "error" and record["tokens_sent"] == 2


async def test_the_fail_after_directive_ends_the_stream_with_a_model_stream_error(
    bedrock: Running,
) -> None:
    *_, error = await stream_events(bedrock.url, invoke_body("hi [sim:fail_after=1]"))
    assert isinstance(error, EventStreamError)
    assert error.response["Error"]["Code"] == "modelStreamErrorException"


@pytest.mark.parametrize(
    "fault",
    [
        {"bedrock_exception": "NoSuchException"},
        {"bedrock_exception": "ModelNotReadyException", "fail_after": 1},
    ],
)
async def test_a_bedrock_exception_no_stream_can_carry_is_not_armed(
    bedrock: Running, fault: dict[str, Any]
) -> None:
    async with bedrock.http.post(bedrock.url + "/_sim/faults", json=fault) as resp:
        assert resp.status == 400
        assert "bedrock_exception" in (await resp.json())["error"]["message"]


# ---- authentication ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client", "code"),
    [
        ({"secret": "not-the-secret"}, "InvalidSignatureException"),
        ({"key_id": "AKIDUNKNOWN"}, "UnrecognizedClientException"),
        ({"key_id": TOKEN_KEY_ID, "token": "another-token"}, "UnrecognizedClientException"),
    ],
)
async def test_wrong_credentials_are_refused(
    bedrock: Running, client: dict[str, Any], code: str
) -> None:
    with pytest.raises(ClientError) as exc:
        await invoke(bedrock.url, invoke_body(), **client)
    assert error_of(exc)[:2] == (code, 403)
    (record,) = await bedrock.requests(1)
    assert record["status"] == 403


async def test_a_session_token_credential_is_accepted(bedrock: Running) -> None:
    got = await invoke(bedrock.url, invoke_body(), key_id=TOKEN_KEY_ID, token=TOKEN)
    assert got["body"]["stop_reason"] == "end_turn"


async def test_a_body_changed_after_signing_is_refused(bedrock: Running) -> None:
    client = runtime(bedrock.url)

    def tamper(request: Any, **_: Any) -> None:
        request.body = request.body.replace(b"Hello there", b"Hello THERE")

    client.meta.events.register("before-send.bedrock-runtime.InvokeModel", tamper)
    with pytest.raises(ClientError) as exc:
        await _call(client.invoke_model, modelId=MODEL, body=json.dumps(invoke_body()))
    code, status, message = error_of(exc)
    assert (code, status) == ("InvalidSignatureException", 403)
    assert message.startswith("The request signature we calculated does not match")


async def test_a_stale_date_is_refused(bedrock: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore signs with its clock; set it six minutes back, as on a host whose clock drifted.
    stale = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=6)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: stale)
    with pytest.raises(ClientError) as exc:
        await invoke(bedrock.url, invoke_body())
    code, status, message = error_of(exc)
    assert (code, status) == ("InvalidSignatureException", 403)
    assert message.startswith("Signature expired: ") and message.endswith(" - 5 min.)")


# ---- the anthropic SDK ------------------------------------------------------------------------


def bedrock_sdk(url: str, **auth: Any) -> anthropic.AsyncAnthropicBedrock:
    if not auth:
        auth = {"aws_access_key": KEY_ID, "aws_secret_key": SECRET}
    return anthropic.AsyncAnthropicBedrock(
        base_url=url, aws_region="us-east-1", max_retries=0, timeout=15.0, **auth
    )


@pytest.mark.parametrize("auth", [{}, {"api_key": API_KEY}], ids=["sigv4", "api-key"])
async def test_anthropic_bedrock_client_non_stream(bedrock: Running, auth: dict[str, Any]) -> None:
    async with bedrock_sdk(bedrock.url, **auth) as client:
        msg = await client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Hello there"}]
        )
    assert msg.model == MODEL and msg.stop_reason == "end_turn"
    assert msg.content[0].type == "text" and len(msg.content[0].text) == 48
    (record,) = await bedrock.requests(1)
    # anthropic 2.x sends its own API version there, which Bedrock takes (bedrock_wire.py).
    assert record["body"]["anthropic_version"] == anthropic._constants.ANTHROPIC_API_VERSION
    assert "model" not in record["body"] and "stream" not in record["body"]


async def test_anthropic_bedrock_client_stream(bedrock: Running) -> None:
    async with (
        bedrock_sdk(bedrock.url) as client,
        client.messages.stream(
            model=MODEL,
            max_tokens=2048,
            messages=[{"role": "user", "content": "hi"}],
            thinking={"type": "enabled", "budget_tokens": 1024},
        ) as stream,
    ):
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.usage.output_tokens == 8 + 12


async def test_server_tool_directives_reach_both_bedrock_apis_final_usage(
    bedrock: Running,
) -> None:
    for sdk in (bedrock_sdk, mantle):
        async with sdk(bedrock.url) as client:
            assert await server_tool_use(client, MODEL) == REPORTED
    paths = [r["path"] for r in await bedrock.requests(4)]
    assert paths == [
        f"/model/{MODEL}/invoke",
        f"/model/{MODEL}/invoke-with-response-stream",
        "/anthropic/v1/messages",
        "/anthropic/v1/messages",
    ]


async def test_anthropic_bedrock_client_sees_a_mid_stream_exception(bedrock: Running) -> None:
    await bedrock.admin(
        "POST", "/_sim/faults", {"bedrock_exception": "internalServerException", "fail_after": 1}
    )
    with pytest.raises(anthropic.APIStatusError, match="internalServerException"):
        async with (
            bedrock_sdk(bedrock.url) as client,
            client.messages.stream(
                model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            ) as stream,
        ):
            await stream.get_final_message()


async def test_anthropic_bedrock_client_with_a_wrong_api_key_is_refused(bedrock: Running) -> None:
    with pytest.raises(anthropic.PermissionDeniedError):
        async with bedrock_sdk(bedrock.url, api_key="not-a-key") as client:
            await client.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )


# ---- the Anthropic-compatible endpoint (/anthropic) -------------------------------------------


def mantle(url: str, **auth: Any) -> anthropic.AsyncAnthropicBedrockMantle:
    if not auth:
        auth = {"aws_access_key": KEY_ID, "aws_secret_key": SECRET}
    return anthropic.AsyncAnthropicBedrockMantle(
        base_url=url + "/anthropic", aws_region="us-east-1", max_retries=0, timeout=15.0, **auth
    )


@pytest.mark.parametrize("auth", [{}, {"api_key": API_KEY}], ids=["sigv4", "api-key"])
async def test_the_anthropic_endpoint_answers_messages(
    bedrock: Running, auth: dict[str, Any]
) -> None:
    async with mantle(bedrock.url, **auth) as client:
        msg = await client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Hello there"}]
        )
        async with client.messages.stream(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Hello there"}]
        ) as stream:
            streamed = await stream.get_final_message()
    assert streamed.content[0].text == msg.content[0].text and msg.model == MODEL
    records = await bedrock.requests(2)
    assert [r["path"] for r in records] == ["/anthropic/v1/messages"] * 2


async def test_the_anthropic_endpoint_refuses_a_wrong_secret(bedrock: Running) -> None:
    async with mantle(bedrock.url, aws_access_key=KEY_ID, aws_secret_key="wrong") as client:
        with pytest.raises(anthropic.PermissionDeniedError):
            await client.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
