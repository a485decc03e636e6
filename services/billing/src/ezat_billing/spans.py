"""Billing's spans (docs/observability.md, "Traces"): one per usage record, from its storing to
its acknowledgement, child of the router span that sent it (the ``traceparent`` its outbox
message, or its request to billing, carried). Made only when ``tracing.ENABLED``; counts, ids
and the cost, nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ezat_common import tracing
from ezat_common.envelopes import UsageAck
from nats.aio.msg import Msg

from .core.rows import UsageRow

if TYPE_CHECKING:
    from opentelemetry.trace import Span

NAME = "billing record"


def attributes(row: UsageRow) -> dict[str, str | int | bool]:
    """A stored row's trace attributes (GenAI conventions, plus the request id and cost)."""
    return {
        **tracing.GEN_AI,
        "gen_ai.request.model": row.model,
        "gen_ai.usage.input_tokens": row.input_tokens,
        "gen_ai.usage.output_tokens": row.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": row.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": (
            row.cache_write_5m_tokens + row.cache_write_1h_tokens
        ),
        "ezat.request_id": row.request_id,
        "ezat.cost_micros": row.cost_micros,
        "ezat.deployment": row.deployment,
        "ezat.usage.status": row.status,
        "ezat.usage.estimated": row.estimated,
    }


def record(row: UsageRow, parent: str) -> Span:
    """A started span for a record billing was asked to store (request/reply)."""
    return tracing.start(NAME, parent, attributes=attributes(row))


def failure_of(ack: UsageAck | None) -> str:
    """What a request/reply's answer says of the span: "" stored, else why not."""
    if ack is None:
        return "unanswered"
    return "" if ack.ok else "refused"


def records(rows: Sequence[UsageRow], msgs: Sequence[Msg]) -> list[Span]:
    """A started span for each row whose outbox message carried a ``traceparent``."""
    started = []
    for row, msg in zip(rows, msgs, strict=False):
        parent = tracing.received(msg.headers)
        if parent:
            started.append(record(row, parent))
    return started


def end_records(started: Sequence[Span], failure: str) -> None:
    """End them: stored and acknowledged, or not (``failure`` names why: an error type)."""
    for span in started:
        if failure:
            tracing.failed(span, failure)
        span.end()
