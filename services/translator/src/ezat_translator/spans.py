"""The translator's span (docs/observability.md, "Traces"): one per request, from its arrival to
its publish to the router (image downloads included, each a fetcher span beneath it). Made only
when ``tracing.ENABLED``; never carries the prompt or an image URL."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ezat_common import envelopes, tracing
from ezat_common.errors import GatewayError

if TYPE_CHECKING:
    from opentelemetry.trace import Span


def translation(req: envelopes.ClientRequest, traceparent: str | None) -> Span:
    """The translation span of ``req``, child of the edge's (``traceparent``)."""
    return tracing.start(
        "translate " + req.api,
        traceparent,
        attributes={
            **tracing.GEN_AI,
            "ezat.request_id": req.request_id,
            "ezat.api": req.api,
        },
    )


def failed(span: Span, exc: BaseException) -> None:
    """Mark the span with why the translation failed: a status, or an error type."""
    if isinstance(exc, GatewayError):
        span.set_attribute("http.response.status_code", exc.status)
        why = str(exc.status)
    elif isinstance(exc, asyncio.CancelledError):
        why = "cancelled"
    else:
        why = type(exc).__name__
    span.set_attribute("error.type", why)
    tracing.failed(span, why)
