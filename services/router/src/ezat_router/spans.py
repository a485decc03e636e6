"""The router's spans (docs/observability.md, "Traces"): the routing decision, and each upstream
attempt as its child. Called only when ``tracing.ENABLED``; with tracing off the router only
passes the ``traceparent`` it received on to the upstream and the usage record.

Attributes are counts, ids and outcomes (OpenTelemetry GenAI conventions); never the prompt,
the completion or a key."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ezat_common import tracing
from ezat_common.envelopes import RouteRequest

from .core.upstream_errors import AttemptFailure
from .metrics import OUTCOME_OF_REASON

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from .forwarder import RequestState
    from .upstream import Endpoint


def routing(req: RouteRequest, traceparent: str | None) -> Span:
    """The request's routing span, child of the translator's."""
    return tracing.start(
        "route " + req.api,
        traceparent,
        attributes={
            **tracing.GEN_AI,
            "gen_ai.request.model": req.model,
            "ezat.request_id": req.request_id,
            "ezat.api": req.api,
        },
    )


def end_routing(span: Span, state: RequestState, outcome: str, affinity: str) -> None:
    """Close the routing span with what the request consumed and how it was routed."""
    span.set_attribute("ezat.outcome", outcome)
    span.set_attribute("ezat.attempts", state.attempts)
    if affinity:
        span.set_attribute("ezat.affinity", affinity)
    if state.endpoint is not None:
        span.set_attribute("ezat.deployment", state.endpoint.dep.name)
        dep = state.endpoint.dep
        span.set_attribute("gen_ai.response.model", dep.upstream_model or dep.model)
    usage = state.usage
    if usage.started:
        write_5m, write_1h = usage.cache_writes()
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens or 0)
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read or 0)
        span.set_attribute("gen_ai.usage.cache_creation.input_tokens", write_5m + write_1h)
    if usage.output_final is not None:
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_final)
    if usage.stop_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [usage.stop_reason])
    if outcome != "ok":
        tracing.failed(span, outcome)
    span.end()


def attempt(state: RequestState, endpoint: Endpoint) -> Span:
    """One upstream attempt (a CLIENT span), child of the routing span."""
    from opentelemetry.trace import SpanKind

    return tracing.start(
        "upstream " + endpoint.dep.name,
        state.traceparent,
        SpanKind.CLIENT,
        {
            "ezat.deployment": endpoint.dep.name,
            "ezat.deployment.kind": endpoint.kind,
            "ezat.attempt": state.attempts,
            "gen_ai.provider.name": "anthropic",
        },
    )


def end_attempt(state: RequestState, failure: AttemptFailure | None, broke: str) -> None:
    """Close the attempt's span with its outcome (``broke``: cancelled or failed inside the
    router, without one)."""
    span, state.attempt_span = state.attempt_span, None
    assert span is not None
    if broke:
        outcome = broke
    elif failure is None:
        outcome = "ok"
    else:
        outcome = OUTCOME_OF_REASON.get(failure.reason, "error_5xx")
    span.set_attribute("ezat.outcome", outcome)
    if outcome != "ok":
        tracing.failed(span, failure.reason if failure is not None else outcome)
    span.end()
