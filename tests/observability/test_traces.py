"""Traces across the five processes (docs/observability.md, "Traces"): a stack exporting to an
OTLP/HTTP receiver in the test, one streamed OpenAI request with a client ``traceparent`` and an
image the fetcher downloads; and a stack with tracing off, which only passes the client's
``traceparent`` on to the upstream (and sends none without one)."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import nats
import openai
import pytest
from billing.factories import record
from ezat_cli.infra import Infra
from ezat_common import envelopes
from ezat_common.outbox import store_directly
from ezat_common.subjects import Subjects
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from support import images, sims
from support.clients import track
from support.config import SONNET, base_url, deployment, listen, model, write_config
from support.otlp import Receiver, Span, receiving
from support.stack import free_ports, key, running

SERVER, CLIENT = 2, 3  # opentelemetry.proto.trace.v1.Span.SpanKind
PROMPT = "Describe this picture of a lighthouse in one word, secret-word zebra"


def _config(path: Path, ports: dict[str, int]) -> Path:
    return write_config(
        path,
        edge={"listen": listen(ports["edge"])},
        router={"metrics_listen": listen(ports["router"])},
        fetcher={"allow_networks": ["127.0.0.0/8"]},
        models=[model(SONNET, aliases=["claude-sonnet-5-5"], prompt_caching=True)],
        simulators=[{"name": "sim", "listen": listen(ports["sim"])}],
        deployments=[
            deployment(
                "sonnet-sim", SONNET, base_url(ports["sim"]), upstream_model="claude-sonnet-5-5"
            )
        ],
    )


class Traced:
    def __init__(
        self, ports: dict[str, int], key: str, receiver: Receiver | None, nats_url: str = ""
    ) -> None:
        self.url, self.sim = base_url(ports["edge"]), base_url(ports["sim"])
        self.nats_url = nats_url
        self.router_metrics = base_url(ports["router"]) + "/metrics"
        self.key, self.receiver = key, receiver

    def openai(self) -> openai.AsyncOpenAI:
        """A client closed when the test ends (support/clients.py)."""
        client = openai.AsyncOpenAI(
            base_url=self.url + "/openai/v1", api_key=self.key, max_retries=0
        )
        return track(client)


@contextmanager
def _stack(
    infra: Infra, database_url: str, data_dir: Path, name: str, env: dict[str, str]
) -> Iterator[tuple[dict[str, int], str]]:
    ports = free_ports("edge", "sim", "router")
    config = _config(data_dir / name / "ezat.toml", ports)
    with running(config, Infra(infra.nats_url, database_url, infra.redis_url), name, env=env):
        yield ports, key(database_url, name, rpm=1000)


@pytest.fixture(scope="module")
def traced(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Traced]:
    with receiving() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with _stack(infra, database_url, data_dir, "traced", env) as (ports, api_key):
            yield Traced(ports, api_key, receiver, infra.nats_url)


@pytest.fixture(scope="module")
def untraced(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Traced]:
    with _stack(infra, database_url, data_dir, "untraced", {}) as (ports, api_key):
        yield Traced(ports, api_key, None)


def _traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


async def _sent_upstream(sim: str, request_id: str) -> dict[str, Any]:
    for entry in await sims.requests(sim, 100):
        if entry["headers"].get("x-request-id") == request_id:
            return entry
    raise AssertionError(f"the deployment never received {request_id}")


def _one(spans: list[Span], service: str) -> Span:
    """The service's span (the router's routing span: not its attempts, CLIENT spans)."""
    found = [s for s in spans if s.service == f"ezat-{service}" and s.kind != CLIENT]
    assert len(found) == 1, (service, [(s.service, s.name) for s in spans])
    return found[0]


async def test_one_streamed_request_is_one_trace_across_the_five_processes(
    traced: Traced,
) -> None:
    header, trace_id, client_span = _traceparent()
    request_id = f"traced-{uuid.uuid4().hex}"
    async with images.serving() as server:
        content: Any = [
            {"type": "image_url", "image_url": {"url": f"{server}/photo.png"}},
            {"type": "text", "text": PROMPT},
        ]
        chunks = await traced.openai().chat.completions.create(
            model="claude-sonnet-5-5",
            max_tokens=32,
            messages=[{"role": "user", "content": content}],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"traceparent": header, "x-request-id": request_id},
        )
        usage = None
        finish = None
        async for chunk in chunks:
            if chunk.usage is not None:
                usage = chunk.usage
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
    assert usage is not None and finish == "stop"

    assert traced.receiver is not None
    spans = traced.receiver.of_trace(trace_id, at_least=6)
    edge, translator, router = _one(spans, "edge"), _one(spans, "translator"), _one(spans, "router")
    fetcher, billing = _one(spans, "fetcher"), _one(spans, "billing")
    attempts = [s for s in spans if s.kind == CLIENT]
    assert len(attempts) == 1
    attempt = attempts[0]
    assert attempt.service == "ezat-router"

    # One trace, parented on the client's span, hop after hop.
    assert {s.trace_id for s in spans} == {trace_id}
    assert (edge.name, edge.kind, edge.parent_span_id) == (
        "POST /openai/v1/chat/completions",
        SERVER,
        client_span,
    )
    assert translator.parent_span_id == edge.span_id
    assert router.parent_span_id == translator.span_id
    assert attempt.parent_span_id == router.span_id
    assert fetcher.parent_span_id == translator.span_id
    assert billing.parent_span_id == router.span_id
    assert not any(s.error for s in spans)

    # The GenAI attributes, equal to the usage the client was given.
    for span in (edge, translator, router, billing):
        assert span.attributes["gen_ai.request.model"] == SONNET
        assert span.attributes["ezat.request_id"] == request_id
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.provider.name"] == "anthropic"
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
    for span in (router, billing):
        a = span.attributes
        read, written = (
            a["gen_ai.usage.cache_read.input_tokens"],
            a["gen_ai.usage.cache_creation.input_tokens"],
        )
        assert a["gen_ai.usage.input_tokens"] + read + written == usage.prompt_tokens
        assert read == (cached or 0)
        assert a["gen_ai.usage.output_tokens"] == usage.completion_tokens
    assert router.attributes["gen_ai.response.model"] == "claude-sonnet-5-5"
    assert router.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert billing.attributes["ezat.cost_micros"] > 0
    assert attempt.attributes["ezat.deployment"] == "sonnet-sim"
    assert attempt.attributes["ezat.deployment.kind"] == "anthropic"
    assert attempt.attributes["ezat.outcome"] == "ok"
    assert attempt.attributes["ezat.upstream.first_byte_seconds"] > 0
    assert edge.attributes["http.response.status_code"] == 200

    # Never the prompt, the key, nor the image's address.
    for span in spans:
        for value in span.attributes.values():
            text = str(value)
            assert "zebra" not in text and traced.key not in text and server not in text

    # The deployment was called within the same trace, from the attempt's span.
    seen = (await _sent_upstream(traced.sim, request_id))["headers"]["traceparent"]
    assert seen == f"00-{trace_id}-{attempt.span_id}-01"


async def test_with_tracing_off_the_clients_traceparent_reaches_the_upstream_unchanged(
    untraced: Traced,
) -> None:
    header, _, _ = _traceparent()
    gpt = untraced.openai()
    with_id, without_id = f"passed-{uuid.uuid4().hex}", f"none-{uuid.uuid4().hex}"
    junk_id, later_id = f"junk-{uuid.uuid4().hex}", f"later-{uuid.uuid4().hex}"
    later = "01" + header[2:] + "-what\tever; x=<y>"  # a later version, with its own fields
    cases: tuple[tuple[str, dict[str, str]], ...] = (
        (with_id, {"traceparent": header, "tracestate": "vendor=value"}),
        (without_id, {}),
        (junk_id, {"traceparent": "00-not-a-trace-01"}),  # not passed on (W3C: ignored)
        (later_id, {"traceparent": later}),
    )
    for request_id, extra in cases:
        chunks = await gpt.chat.completions.create(
            model="claude-sonnet-5-5",
            max_tokens=8,
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
            extra_headers={"x-request-id": request_id, **extra},
        )
        async for _ in chunks:
            pass
    sent = (await _sent_upstream(untraced.sim, with_id))["headers"]
    assert sent["traceparent"] == header
    assert "tracestate" not in sent  # read only for the edge's own span, never passed on
    assert "traceparent" not in (await _sent_upstream(untraced.sim, without_id))["headers"]
    assert "traceparent" not in (await _sent_upstream(untraced.sim, junk_id))["headers"]
    # Read by its first four fields and passed on as version 00: its own fields never travel.
    assert (await _sent_upstream(untraced.sim, later_id))["headers"]["traceparent"] == header


@pytest.mark.parametrize(
    ("tracestate", "carried"),
    [
        ("vendor=value, tenant@sys=x", "vendor=value,tenant@sys=x"),
        ("Vendor=value", ""),  # not W3C (upper-case key): ignored, the trace still continues
        (",".join(f"k{i}=v" for i in range(33)), ""),  # more than 32 members
    ],
    ids=["valid", "upper-case-key", "33-members"],
)
async def test_with_tracing_on_a_valid_tracestate_is_carried_by_the_edge_span(
    traced: Traced, tracestate: str, carried: str
) -> None:
    header, trace_id, client_span = _traceparent()
    answer = await traced.openai().chat.completions.create(
        model="claude-sonnet-5-5",
        max_tokens=8,
        messages=[{"role": "user", "content": "hello"}],
        extra_headers={"traceparent": header, "tracestate": tracestate},
    )
    assert answer.choices
    assert traced.receiver is not None
    edge = _one(traced.receiver.of_trace(trace_id, at_least=4), "edge")
    assert edge.parent_span_id == client_span
    assert edge.trace_state == carried


async def _exemplar_traces(url: str, metric: str) -> set[str]:
    """The trace ids of the exemplars on ``metric``'s buckets, read as Prometheus scrapes."""
    accept = {"accept": "application/openmetrics-text; version=1.0.0"}
    async with aiohttp.ClientSession() as http, http.get(url, headers=accept) as resp:
        text = await resp.text()
    return {
        s.exemplar.labels["trace_id"]
        for family in openmetrics_families(text)
        for s in family.samples
        if s.name == f"{metric}_bucket" and s.exemplar is not None
    }


async def test_with_tracing_on_the_latency_histograms_link_to_the_trace(traced: Traced) -> None:
    header, trace_id, _ = _traceparent()
    chunks = await traced.openai().chat.completions.create(
        model="claude-sonnet-5-5",
        max_tokens=8,
        messages=[{"role": "user", "content": "hello"}],
        stream=True,
        extra_headers={"traceparent": header},
    )
    async for _ in chunks:
        pass
    edge = traced.url + "/metrics"
    assert trace_id in await _exemplar_traces(edge, "ezat_edge_first_token_seconds")
    assert trace_id in await _exemplar_traces(edge, "ezat_edge_request_seconds")
    router = traced.router_metrics
    assert trace_id in await _exemplar_traces(router, "ezat_router_upstream_first_byte_seconds")


async def test_a_non_streamed_answer_gives_the_routing_span_its_finish_reason(
    traced: Traced,
) -> None:
    header, trace_id, _ = _traceparent()
    answer = await traced.openai().chat.completions.create(
        model="claude-sonnet-5-5",
        max_tokens=32,
        messages=[{"role": "user", "content": "hello"}],
        extra_headers={"traceparent": header},
    )
    assert answer.choices[0].finish_reason == "stop"
    # The Anthropic API's body is decoded for its model rewrite: the same decode gives it.
    m_header, m_trace_id, _ = _traceparent()
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            traced.url + "/v1/messages",
            json={
                "model": "claude-sonnet-5-5",
                "max_tokens": 32,
                "messages": [{"role": "user", "content": "[sim:stop=zebra] hello"}],
            },
            headers={"x-api-key": traced.key, "traceparent": m_header},
        ) as resp,
    ):
        body = await resp.json()
    assert resp.status == 200 and body["stop_reason"] == "stop_sequence"

    assert traced.receiver is not None
    chat = _one(traced.receiver.of_trace(trace_id, at_least=5), "router")
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    messages = _one(traced.receiver.of_trace(m_trace_id, at_least=4), "router")
    assert messages.attributes["gen_ai.response.finish_reasons"] == ["stop_sequence"]


async def test_a_record_settled_by_the_router_itself_is_billed_within_the_trace(
    traced: Traced,
) -> None:
    """A client that leaves mid-stream: its ``client_closed`` record goes to the outbox from the
    router (``UsageSink.record_later``, not the held publish), and billing's span still hangs
    under the routing span."""
    header, trace_id, _ = _traceparent()
    request_id = f"left-{uuid.uuid4().hex}"
    chunks = await traced.openai().chat.completions.create(
        model="claude-sonnet-5-5",
        max_tokens=32,
        # Three tokens, then the deployment goes quiet: the client gives up.
        messages=[{"role": "user", "content": "[sim:stall_after=3] hello"}],
        stream=True,
        extra_headers={"traceparent": header, "x-request-id": request_id},
    )
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    await chunks.close()

    assert traced.receiver is not None
    spans = traced.receiver.of_trace(trace_id, at_least=5)
    router, billing = _one(spans, "router"), _one(spans, "billing")
    assert router.attributes["ezat.outcome"] == "client_closed"
    assert billing.parent_span_id == router.span_id
    assert billing.attributes["ezat.request_id"] == request_id
    assert billing.attributes["ezat.usage.status"] == "client_closed"
    assert billing.attributes["ezat.usage.estimated"] is True


async def test_a_record_billing_is_asked_to_store_is_a_span_of_the_asking_trace(
    traced: Traced,
) -> None:
    """The router's last resort when the outbox does not confirm (``outbox.store_directly``):
    billing's request/reply, with the asking span's ``traceparent`` in the request's headers."""
    header, trace_id, asking_span = _traceparent()
    rec = record(request_id=f"asked-{uuid.uuid4().hex}", input_tokens=12, output_tokens=3)
    nc = await nats.connect(traced.nats_url)
    try:
        subject = Subjects("traced").usage_record
        problem = await store_directly(nc, subject, envelopes.encode(rec), 5.0, header)
    finally:
        await nc.close()
    assert problem is None

    assert traced.receiver is not None
    (billing,) = traced.receiver.of_trace(trace_id, at_least=1)
    assert (billing.service, billing.name) == ("ezat-billing", "billing record")
    assert billing.parent_span_id == asking_span and not billing.error
    assert billing.attributes["ezat.request_id"] == rec.request_id
    assert billing.attributes["gen_ai.usage.input_tokens"] == 12
    assert billing.attributes["ezat.cost_micros"] > 0
