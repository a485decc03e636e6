"""The simulator's Vertex AI face, called with the official clients unchanged: google-auth's
service-account credentials (their real JWT-bearer exchange at the simulator's /token) and the
``anthropic`` SDK's ``AsyncAnthropicVertex``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest
import pytest_asyncio
from anthropic import AsyncAnthropicVertex
from ezat_simulator.oauth import load_service_account
from ezat_simulator.vertex import VertexSettings
from google.auth import exceptions as google_exceptions
from google.auth.transport.requests import Request
from google.oauth2 import service_account
from support.google import CLOUD_PLATFORM, point_token_uri, write_service_account

from .conftest import REPORTED, Running, StartSim, server_tool_use

pytestmark = pytest.mark.asyncio(loop_scope="function")

MODEL = "claude-sonnet-4-5@20250929"
VERSION = {"anthropic_version": "vertex-2023-10-16"}  # the SDK's own default is newer
USER = [{"role": "user", "content": "Hello from Vertex"}]
PATH = "/v1/projects/ezat-test/locations/us-east5/publishers/anthropic/models/"


class Vertex:
    """A simulator with a Vertex face trusting one service account, and its key file."""

    def __init__(self, sim: Running, key_file: Path) -> None:
        self.sim = sim
        self.key_file = key_file
        self.clients: list[AsyncAnthropicVertex] = []

    def credentials(self, key_file: Path | None = None) -> service_account.Credentials:
        return service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
            str(key_file or self.key_file), scopes=[CLOUD_PLATFORM]
        )

    def client(self, region: str = "us-east5", **auth: Any) -> AsyncAnthropicVertex:
        if not auth:
            auth = {"credentials": self.credentials()}
        client = AsyncAnthropicVertex(
            base_url=self.sim.url + "/v1",
            region=region,
            project_id="ezat-test",
            max_retries=0,
            timeout=15.0,
            **auth,
        )
        self.clients.append(client)
        return client

    async def token(self, credentials: service_account.Credentials | None = None) -> str:
        creds = credentials or self.credentials()
        # google-auth refreshes with blocking I/O; the simulator shares this event loop.
        await asyncio.to_thread(creds.refresh, Request())
        return str(creds.token)

    async def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.sim.admin("GET", "/_sim/stats")
        return result


MakeVertex = Callable[..., Awaitable[Vertex]]


@pytest_asyncio.fixture(loop_scope="function")
async def make_vertex(start_sim: StartSim, tmp_path: Path) -> AsyncIterator[MakeVertex]:
    """Start simulators with a Vertex face (``VertexSettings`` keywords) trusting a new key."""
    made: list[Vertex] = []

    async def make(**settings: Any) -> Vertex:
        key_file = write_service_account(tmp_path / f"sa{len(made)}.json", "http://unset/token")
        vertex = VertexSettings((load_service_account(key_file),), **settings)
        sim = await start_sim(vertex=vertex)
        made.append(Vertex(sim, point_token_uri(key_file, sim.url + "/token")))
        return made[-1]

    yield make
    for vertex in made:
        for client in vertex.clients:
            await client.close()


@pytest_asyncio.fixture(loop_scope="function")
async def vertex(make_vertex: MakeVertex) -> Vertex:
    return await make_vertex()


def google_error(err: anthropic.APIStatusError) -> dict[str, Any]:
    body = err.body
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "message", "status"}, error
    return error


# ---- answers equal to the Anthropic face's ---------------------------------------------------


async def test_raw_predict_answers_as_the_anthropic_face(vertex: Vertex) -> None:
    msg = await vertex.client().messages.create(
        model=MODEL,
        max_tokens=100,
        messages=USER,
        extra_body=VERSION,  # type: ignore[arg-type]
    )
    same = await vertex.sim.client.messages.create(model=MODEL, max_tokens=100, messages=USER)  # type: ignore[arg-type]
    assert msg.model == MODEL and msg.stop_reason == "end_turn"
    assert msg.content == same.content and msg.usage == same.usage
    vertex_call, _ = await vertex.sim.requests(2)
    assert vertex_call["path"] == PATH + MODEL + ":rawPredict"
    assert vertex_call["body"] == {**VERSION, "max_tokens": 100, "messages": USER}
    assert vertex_call["headers"]["authorization"].startswith("Bearer ya29.")
    assert (await vertex.stats())["tokens_issued"] == 1


async def test_stream_raw_predict_streams_anthropic_sse(vertex: Vertex) -> None:
    deltas: list[str] = []
    async with vertex.client().messages.stream(
        model=MODEL,
        max_tokens=100,
        messages=USER,
        extra_body=VERSION,  # type: ignore[arg-type]
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                deltas.append(event.delta.text)
        final = await stream.get_final_message()
    same = await vertex.sim.client.messages.create(model=MODEL, max_tokens=100, messages=USER)  # type: ignore[arg-type]
    assert "".join(deltas) == final.content[0].text == same.content[0].text  # type: ignore[union-attr]
    assert len(deltas) == 12 and final.usage.output_tokens == 12
    (record, _) = await vertex.sim.requests(2)
    assert record["path"] == PATH + MODEL + ":streamRawPredict"
    assert record["body"]["stream"] is True and "model" not in record["body"]


async def test_server_tool_directives_reach_the_sdk_in_the_final_usage(vertex: Vertex) -> None:
    assert await server_tool_use(vertex.client(), MODEL, extra_body=VERSION) == REPORTED
    assert [r["path"].rsplit(":", 1)[1] for r in await vertex.sim.requests(2)] == [
        "rawPredict",
        "streamRawPredict",
    ]


async def test_count_tokens_names_the_model_in_its_body(vertex: Vertex) -> None:
    counted = await vertex.client().messages.count_tokens(
        model=MODEL,
        messages=USER,
        extra_body=VERSION,  # type: ignore[arg-type]
    )
    same = await vertex.sim.client.messages.count_tokens(model=MODEL, messages=USER)  # type: ignore[arg-type]
    assert counted.input_tokens == same.input_tokens > 0
    (record, _) = await vertex.sim.requests(2)
    assert record["path"] == PATH + "count-tokens:rawPredict"
    assert record["body"] == {**VERSION, "model": MODEL, "messages": USER}


async def test_the_global_location(vertex: Vertex) -> None:
    await vertex.client(region="global").messages.create(
        model=MODEL,
        max_tokens=5,
        messages=USER,
        extra_body=VERSION,  # type: ignore[arg-type]
    )
    (record,) = await vertex.sim.requests(1)
    assert record["path"].startswith("/v1/projects/ezat-test/locations/global/publishers/")


async def test_system_messages_under_claude_codes_betas(vertex: Vertex) -> None:
    steered = [*USER, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
    steered.append({"role": "system", "content": "be brief"})
    msg = await vertex.client().beta.messages.create(
        model=MODEL,
        max_tokens=10,
        messages=steered,  # type: ignore[arg-type]
        betas=["mid-conversation-system-2026-04-07", "per-turn-control-2026-07-01"],
        extra_body=VERSION,
    )
    assert msg.stop_reason in ("end_turn", "max_tokens")
    (record,) = await vertex.sim.requests(1)
    assert "per-turn-control-2026-07-01" in record["headers"]["anthropic-beta"]


# ---- body rules ------------------------------------------------------------------------------


async def test_the_sdks_newer_default_version_is_refused_unless_configured(
    vertex: Vertex, make_vertex: MakeVertex
) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        await vertex.client().messages.create(model=MODEL, max_tokens=5, messages=USER)  # type: ignore[arg-type]
    error = google_error(err.value)
    assert error["status"] == "INVALID_ARGUMENT" and "anthropic_version" in error["message"]
    newer = await make_vertex(anthropic_versions=frozenset({"vertex-2023-10-16", "2026-10-21"}))
    msg = await newer.client().messages.create(model=MODEL, max_tokens=5, messages=USER)  # type: ignore[arg-type]
    assert msg.usage.output_tokens == 5


async def test_a_body_naming_the_model_is_refused(vertex: Vertex) -> None:
    token = await vertex.token()
    body = {**VERSION, "model": MODEL, "max_tokens": 5, "messages": USER}
    headers = {"authorization": f"Bearer {token}"}
    url = vertex.sim.url + PATH + MODEL + ":rawPredict"
    async with vertex.sim.http.post(url, json=body, headers=headers) as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["message"].startswith("model:")


async def test_the_models_own_400_passes_through_in_anthropics_shape(vertex: Vertex) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        await vertex.client().messages.create(
            model=MODEL,
            max_tokens=5,
            messages=[{"role": "system", "content": "x"}],  # type: ignore[list-item]
            extra_body=VERSION,
        )
    assert err.value.body["type"] == "error"  # type: ignore[index]
    assert err.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


# ---- OAuth ----------------------------------------------------------------------------------


async def test_an_expired_token_is_refused_and_a_refreshed_one_accepted(
    make_vertex: MakeVertex,
) -> None:
    vertex = await make_vertex(token_lifetime=1.0)
    creds = vertex.credentials()
    first = await vertex.token(creds)
    client = vertex.client(access_token=first)
    await client.messages.create(model=MODEL, max_tokens=5, messages=USER, extra_body=VERSION)  # type: ignore[arg-type]
    await asyncio.sleep(1.1)
    with pytest.raises(anthropic.AuthenticationError) as err:
        await client.messages.create(model=MODEL, max_tokens=5, messages=USER, extra_body=VERSION)  # type: ignore[arg-type]
    assert google_error(err.value)["status"] == "UNAUTHENTICATED"
    assert err.value.response.headers["www-authenticate"].startswith("Bearer")
    second = await vertex.token(creds)
    assert second != first
    fresh = vertex.client(access_token=second)
    await fresh.messages.create(model=MODEL, max_tokens=5, messages=USER, extra_body=VERSION)  # type: ignore[arg-type]
    assert (await vertex.stats())["tokens_issued"] == 2


async def test_the_sdk_refreshes_short_lived_tokens_itself(make_vertex: MakeVertex) -> None:
    vertex = await make_vertex(token_lifetime=1.0)
    client = vertex.client()
    for _ in range(2):
        await client.messages.create(model=MODEL, max_tokens=5, messages=USER, extra_body=VERSION)  # type: ignore[arg-type]
    # google-auth renews a token within 3m45s of its expiry: with 1 s tokens, before every call,
    # so no call ever carries an expired one.
    assert (await vertex.stats())["tokens_issued"] == 2


async def test_a_token_the_simulator_did_not_issue_is_refused(vertex: Vertex) -> None:
    with pytest.raises(anthropic.AuthenticationError) as err:
        await vertex.client(access_token="ya29.not-issued-here").messages.create(
            model=MODEL,
            max_tokens=5,
            messages=USER,
            extra_body=VERSION,  # type: ignore[arg-type]
        )
    error = google_error(err.value)
    assert error == {"code": 401, "message": error["message"], "status": "UNAUTHENTICATED"}
    (record,) = await vertex.sim.requests(1)
    assert record["status"] == 401


@pytest.mark.parametrize("headers", [{}, {"x-api-key": "sk-ant"}, {"authorization": "Basic eA=="}])
async def test_no_bearer_token_is_unauthenticated(vertex: Vertex, headers: dict[str, str]) -> None:
    body = {**VERSION, "max_tokens": 5, "messages": USER}
    url = vertex.sim.url + PATH + MODEL + ":rawPredict"
    async with vertex.sim.http.post(url, json=body, headers=headers) as resp:
        assert resp.status == 401
        assert (await resp.json())["error"]["status"] == "UNAUTHENTICATED"


async def test_a_jwt_signed_by_another_key_is_refused_at_token(
    vertex: Vertex, tmp_path: Path
) -> None:
    impostor = write_service_account(tmp_path / "other.json", vertex.sim.url + "/token")
    with pytest.raises(google_exceptions.RefreshError) as err:
        await vertex.token(vertex.credentials(impostor))
    assert "invalid_grant: Invalid JWT Signature." in str(err.value)
    stranger = write_service_account(
        tmp_path / "stranger.json",
        vertex.sim.url + "/token",
        email="who@else.iam.gserviceaccount.com",
    )
    with pytest.raises(google_exceptions.RefreshError, match="account not found"):
        await vertex.token(vertex.credentials(stranger))
    assert (await vertex.stats())["tokens_issued"] == 0


async def test_a_token_without_the_cloud_platform_scope_is_permission_denied(
    vertex: Vertex,
) -> None:
    creds = service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
        str(vertex.key_file), scopes=["https://www.googleapis.com/auth/devstorage.read_only"]
    )
    with pytest.raises(anthropic.PermissionDeniedError) as err:
        await vertex.client(access_token=await vertex.token(creds)).messages.create(
            model=MODEL,
            max_tokens=5,
            messages=USER,
            extra_body=VERSION,  # type: ignore[arg-type]
        )
    assert google_error(err.value)["status"] == "PERMISSION_DENIED"


# ---- faults in Google's shape ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (429, "RESOURCE_EXHAUSTED"),
        (503, "UNAVAILABLE"),
        (500, "INTERNAL"),
        (400, "INVALID_ARGUMENT"),
        (403, "PERMISSION_DENIED"),
        (504, "DEADLINE_EXCEEDED"),
    ],
)
async def test_faults_answer_in_googles_shape(vertex: Vertex, status: int, name: str) -> None:
    await vertex.sim.admin("POST", "/_sim/faults", {"status": status})
    with pytest.raises(anthropic.APIStatusError) as err:
        await vertex.client().messages.create(
            model=MODEL,
            max_tokens=5,
            messages=USER,
            extra_body=VERSION,  # type: ignore[arg-type]
        )
    assert err.value.status_code == status
    assert google_error(err.value) == {
        "code": status,
        "message": err.value.body["error"]["message"],
        "status": name,
    }  # type: ignore[index]
    assert "retry-after" not in err.value.response.headers


async def test_a_mid_stream_failure_is_anthropics_error_event(vertex: Vertex) -> None:
    await vertex.sim.admin("POST", "/_sim/faults", {"fail_after": 3})
    texts: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as err:
        async with vertex.client().messages.stream(
            model=MODEL,
            max_tokens=50,
            messages=USER,
            extra_body=VERSION,  # type: ignore[arg-type]
        ) as stream:
            async for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    texts.append(event.delta.text)
    assert len(texts) == 3
    assert err.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    (record,) = await vertex.sim.requests(1)
    assert record["outcome"] == "error" and record["tokens_sent"] == 3
