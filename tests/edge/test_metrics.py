"""The edge's metrics as an operator reads them (docs/observability.md, "Edge"): a stack of its
own (one simulator deployment), traffic from the official SDKs on both APIs, then the edge's
``/metrics`` read before and after, classic text and OpenMetrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import anthropic
import asyncpg
import openai
import pytest
from ezat_cli.infra import Infra, free_port
from ezat_common import db
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families
from support.clients import track
from support.config import SONNET, base_url, listen, model, one_simulator, write_config
from support.stack import create_key, key, running

QUIET = "anthropic/claude-quiet-sim"  # in the catalogue; no test sends it a request
ALIAS = "claude-sonnet-5-5"  # what the clients send; the label is the canonical SONNET
HELLO = [{"role": "user", "content": "Hello"}]
# The first content delta 0.6 s after the stream's start (message_start leaves at once), then
# four more 0.1 s apart.
SLOW = [{"role": "user", "content": "[sim:tokens=5 first_token_ms=600 token_ms=100] Hi"}]
# Every answer here comes in well under a second: a client that waits longer names the call that
# hung instead of the whole test timing out.
CLIENT_TIMEOUT = 30.0
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class EdgeStack:
    url: str
    key: str
    database_url: str

    def anthropic(self, api_key: str | None = None) -> anthropic.AsyncAnthropic:
        """A client closed when the test ends (support/clients.py)."""
        client = anthropic.AsyncAnthropic(
            base_url=self.url,
            api_key=self.key if api_key is None else api_key,
            max_retries=0,
            timeout=CLIENT_TIMEOUT,
        )
        return track(client)

    def openai(self, api_key: str | None = None) -> openai.AsyncOpenAI:
        """A client closed when the test ends (support/clients.py)."""
        client = openai.AsyncOpenAI(
            base_url=self.url + "/openai/v1",
            api_key=self.key if api_key is None else api_key,
            max_retries=0,
            timeout=CLIENT_TIMEOUT,
        )
        return track(client)

    async def scrape(self) -> str:
        timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(self.url + "/metrics") as resp,
        ):
            assert resp.status == 200
            return await resp.text()

    async def samples(self) -> Samples:
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(await self.scrape())
            for s in family.samples
        }

    async def moved(self, action: Callable[[], Awaitable[object]]) -> Callable[..., float]:
        """Run ``action``; a reader of how much a sample moved meanwhile (0 for one absent)."""
        before = await self.samples()
        await action()
        after = await self.samples()

        def delta(name: str, **labels: str) -> float:
            k = (name, frozenset(labels.items()))
            return after.get(k, 0.0) - before.get(k, 0.0)

        return delta


@pytest.fixture(scope="module")
def edge_stack(infra: Infra, database_url: str, data_dir: Path) -> Iterator[EdgeStack]:
    edge, sim = free_port(), free_port()
    sections = one_simulator(edge, sim, simulators=[{"name": "metrics-sim", "listen": listen(sim)}])
    sections["models"] = [*sections["models"], model(QUIET)]  # type: ignore[misc]
    config = write_config(data_dir / f"edge-metrics-{edge}" / "ezat.toml", **sections)
    shared = Infra(infra.nats_url, database_url, infra.redis_url)  # stops none of the servers
    with running(config, shared, f"edgemetrics{edge}"):
        yield EdgeStack(base_url(edge), key(database_url, "edge-metrics"), database_url)


async def test_streams_count_time_to_first_token_and_the_final_hold(edge_stack: EdgeStack) -> None:
    async def anthropic_stream() -> None:
        async with edge_stack.anthropic().messages.stream(
            model=ALIAS, max_tokens=64, messages=SLOW
        ) as stream:
            assert (await stream.get_final_message()).content

    async def openai_stream() -> None:
        chunks = await edge_stack.openai().chat.completions.create(
            model=ALIAS,
            max_tokens=64,
            messages=SLOW,
            stream=True,  # type: ignore[arg-type]
        )
        assert [c async for c in chunks if c.choices and c.choices[0].delta.content]

    for api, send in (("anthropic", anthropic_stream), ("openai", openai_stream)):
        delta = await edge_stack.moved(send)
        model = {"api": api, "model": SONNET}
        assert delta("ezat_edge_requests_total", api=api, status="2xx") == 1
        assert delta("ezat_edge_first_token_seconds_count", **model) == 1
        assert delta("ezat_edge_request_seconds_count", **model) == 1
        assert delta("ezat_edge_final_hold_seconds_count", api=api) == 1
        assert delta("ezat_edge_request_body_bytes_count", api=api) == 1
        assert delta("ezat_edge_response_body_bytes_count", api=api) == 1
        # The first token is the first delta, 0.6 s in, not the 200 and message_start (at once);
        # the whole stream takes 0.4 s more.
        first = delta("ezat_edge_first_token_seconds_sum", **model)
        whole = delta("ezat_edge_request_seconds_sum", **model)
        assert 0.6 <= first < whole - 0.3, (api, first, whole)
        # The hold is the wait for the usage outbox's acknowledgement: milliseconds.
        assert 0 <= delta("ezat_edge_final_hold_seconds_sum", api=api) < 1.0


async def test_body_sizes_are_the_bytes_sent_and_received(edge_stack: EdgeStack) -> None:
    sizes: dict[str, int] = {}

    async def anthropic_call() -> None:
        raw = await edge_stack.anthropic().messages.with_raw_response.create(
            model=ALIAS, max_tokens=64, messages=HELLO
        )
        sizes["request"] = len(raw.http_request.content)
        sizes["response"] = len(raw.http_response.content)

    async def openai_stream() -> None:
        client = edge_stack.openai()
        async with client.chat.completions.with_streaming_response.create(
            model=ALIAS,
            max_tokens=64,
            messages=HELLO,
            stream=True,  # type: ignore[arg-type]
        ) as resp:
            sizes["request"] = len(resp.http_request.content)
            sizes["response"] = sum([len(part) async for part in resp.iter_bytes()])

    for api, send in (("anthropic", anthropic_call), ("openai", openai_stream)):
        delta = await edge_stack.moved(send)
        assert delta("ezat_edge_request_body_bytes_sum", api=api) == sizes["request"]
        assert delta("ezat_edge_response_body_bytes_sum", api=api) == sizes["response"]
        # A non-streamed answer's first token is its body: it counts too.
        assert delta("ezat_edge_first_token_seconds_count", api=api, model=SONNET) == 1


async def test_a_made_up_model_makes_no_series_of_its_own(edge_stack: EdgeStack) -> None:
    made_up = "made-up-model-e7c1"

    async def send() -> None:
        with pytest.raises(anthropic.NotFoundError):
            await edge_stack.anthropic().messages.create(
                model=made_up, max_tokens=8, messages=HELLO
            )
        with pytest.raises(openai.NotFoundError):
            await edge_stack.openai().chat.completions.create(
                model=made_up,
                max_tokens=8,
                messages=HELLO,  # type: ignore[arg-type]
            )

    delta = await edge_stack.moved(send)
    for api in ("anthropic", "openai"):
        assert delta("ezat_edge_requests_total", api=api, status="4xx") == 1
        assert delta("ezat_edge_request_seconds_count", api=api, model="other") == 1
        assert delta("ezat_edge_first_token_seconds_count", api=api, model="other") == 0
    assert made_up not in await edge_stack.scrape()


async def _revoked_key(database_url: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        stored, secret = await db.create_key(conn, "edge-metrics-revoked")
        assert await db.revoke_key(conn, stored.id)
    finally:
        await conn.close()
    return secret


async def test_refused_keys_count_why(edge_stack: EdgeStack) -> None:
    revoked = await _revoked_key(edge_stack.database_url)
    unknown = "ezat_sk_" + "x" * 43

    async def send() -> None:
        for api_key in (unknown, revoked):
            with pytest.raises(anthropic.AuthenticationError):
                await edge_stack.anthropic(api_key).messages.create(
                    model=ALIAS, max_tokens=8, messages=HELLO
                )
        # No key at all: the SDKs refuse to send that, a bare HTTP client does.
        body = {"model": ALIAS, "max_tokens": 8, "messages": HELLO}
        async with aiohttp.ClientSession() as http:
            for path in ("/v1/messages", "/openai/v1/chat/completions"):
                async with http.post(edge_stack.url + path, json=body) as resp:
                    assert resp.status == 401

    delta = await edge_stack.moved(send)
    assert delta("ezat_edge_auth_failures_total", reason="missing") == 2
    assert delta("ezat_edge_auth_failures_total", reason="invalid") == 1
    assert delta("ezat_edge_auth_failures_total", reason="revoked") == 1
    assert delta("ezat_edge_requests_total", api="anthropic", status="4xx") == 3
    assert delta("ezat_edge_requests_total", api="openai", status="4xx") == 1


async def test_limits_and_budgets_count_refusals(edge_stack: EdgeStack) -> None:
    url = edge_stack.database_url
    per_minute = await create_key(url, "edge-metrics-rpm", rpm=1)
    few_tokens = await create_key(url, "edge-metrics-tpm", tpm=5)
    no_budget = await create_key(url, "edge-metrics-budget", monthly_budget_micros=0)

    async def send() -> None:
        await edge_stack.anthropic(per_minute).messages.create(
            model=ALIAS, max_tokens=8, messages=HELLO
        )
        with pytest.raises(anthropic.RateLimitError):
            await edge_stack.anthropic(per_minute).messages.create(
                model=ALIAS, max_tokens=8, messages=HELLO
            )
        with pytest.raises(openai.RateLimitError):
            await edge_stack.openai(few_tokens).chat.completions.create(
                model=ALIAS,
                max_tokens=8,
                messages=HELLO,  # type: ignore[arg-type]
            )
        with pytest.raises(anthropic.PermissionDeniedError):
            await edge_stack.anthropic(no_budget).messages.create(
                model=ALIAS, max_tokens=8, messages=HELLO
            )

    delta = await edge_stack.moved(send)
    assert delta("ezat_edge_rate_limited_total", limit="requests") == 1
    assert delta("ezat_edge_rate_limited_total", limit="tokens") == 1
    assert delta("ezat_edge_budget_refused_total") == 1
    assert delta("ezat_edge_requests_total", api="anthropic", status="2xx") == 1
    assert delta("ezat_edge_requests_total", api="anthropic", status="4xx") == 2
    assert delta("ezat_edge_requests_total", api="openai", status="4xx") == 1


async def test_a_client_that_leaves_a_stream_is_counted(edge_stack: EdgeStack) -> None:
    name = "ezat_edge_client_disconnects_total"
    long = [{"role": "user", "content": "[sim:tokens=200 token_ms=50] Hi"}]
    before = await edge_stack.samples()

    async def count(api: str) -> float:
        k = (name, frozenset({"api": api}.items()))
        return (await edge_stack.samples()).get(k, 0.0) - before.get(k, 0.0)

    async with edge_stack.anthropic().messages.stream(
        model=ALIAS, max_tokens=512, messages=long
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                break  # leaving the block closes the connection mid-stream
    chunks = await edge_stack.openai().chat.completions.create(
        model=ALIAS,
        max_tokens=512,
        messages=long,  # type: ignore[arg-type]
        stream=True,
    )
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    await chunks.close()
    deadline = time.monotonic() + 10
    while (await count("anthropic"), await count("openai")) != (1, 1):
        assert time.monotonic() < deadline, "each client's leaving counted once, by its API"
        await asyncio.sleep(0.1)


async def test_an_openmetrics_scrape_parses(edge_stack: EdgeStack) -> None:
    await edge_stack.anthropic().messages.create(model=ALIAS, max_tokens=8, messages=HELLO)
    accept = "application/openmetrics-text; version=1.0.0; charset=utf-8"
    async with (
        aiohttp.ClientSession() as http,
        http.get(edge_stack.url + "/metrics", headers={"accept": accept}) as resp,
    ):
        assert resp.status == 200
        assert resp.headers["content-type"].startswith("application/openmetrics-text")
        text = await resp.text()
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in om_families(text)}
    assert families["ezat_edge_first_token_seconds"].type == "histogram"
    assert families["ezat_edge_requests"].type == "counter"
    counts = [
        s.value
        for s in families["ezat_edge_request_seconds"].samples
        if s.name.endswith("_count") and s.labels == {"api": "anthropic", "model": SONNET}
    ]
    assert counts and counts[0] >= 1
    # Without an Accept header: the classic text format, as before.
    assert "# EOF" not in await edge_stack.scrape()


async def test_every_catalogue_model_has_its_series_before_its_first_request(
    edge_stack: EdgeStack,
) -> None:
    # At zero from the start: a series born at its first request would show no rate until its
    # second, and a quiet model would read "no data" on the dashboards instead of 0.
    samples = await edge_stack.samples()
    for api in ("anthropic", "openai"):
        for name in ("ezat_edge_request_seconds_count", "ezat_edge_first_token_seconds_count"):
            assert samples[(name, frozenset({"api": api, "model": QUIET}.items()))] == 0.0
