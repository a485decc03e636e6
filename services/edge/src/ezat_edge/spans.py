"""The edge's span (docs/observability.md, "Traces"): one SERVER span per model call, child of
the client's W3C ``traceparent`` (a new trace without one), parent of everything the request
does behind the edge. Made only when ``tracing.ENABLED``; never the body, a key or the
Authorization header."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from ezat_common import envelopes, tracing

from .protocol import RID

if TYPE_CHECKING:
    from opentelemetry.trace import Span


def request(
    request: web.Request, api: envelopes.Api, traceparent: str | None, tracestate: str | None
) -> Span:
    """The request's span (``traceparent``, ``tracestate``: the client's, validated, if it sent
    them)."""
    from opentelemetry.trace import SpanKind

    return tracing.start(
        f"{request.method} {request.path}",
        traceparent,
        SpanKind.SERVER,
        {
            "http.request.method": request.method,
            "url.path": request.path,
            **tracing.GEN_AI,
            "ezat.api": api,
            "ezat.request_id": request.get(RID, ""),
        },
        tracestate,
    )


def answered(span: Span, status: int) -> None:
    """End the span with the status the client got (5xx marks it failed, as HTTP servers do)."""
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_attribute("error.type", str(status))
        tracing.failed(span, str(status))
    span.end()


def left(span: Span) -> None:
    """End the span of a client that went away before its answer."""
    span.set_attribute("error.type", "client_disconnected")
    tracing.failed(span, "client_disconnected")
    span.end()


def trace_id(span: Span) -> str:
    """The span's trace id, for the latency histograms' exemplars."""
    return f"{span.get_span_context().trace_id:032x}"
