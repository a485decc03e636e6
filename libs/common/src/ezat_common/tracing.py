"""Traces with OpenTelemetry (docs/observability.md, "Traces"): off unless an OTLP endpoint is
configured, and then one span per hop of a request, parented across the processes through the
W3C ``traceparent`` that travels in NATS message headers and on to the upstream.

Off (no ``OTEL_EXPORTER_OTLP_ENDPOINT`` nor ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or
``OTEL_SDK_DISABLED=true``), nothing here is imported beyond this module and ``ENABLED`` is
False: the services create no span object, and only pass a client's ``traceparent`` along, as
they received it. On, the SDK reads the standard ``OTEL_*`` variables itself (endpoint, headers,
timeout, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, ``OTEL_RESOURCE_ATTRIBUTES``);
``OTEL_SERVICE_NAME`` defaults to ``ezat-<service>``. Spans are exported in batches over OTLP/HTTP
(protobuf) from the SDK's own thread, and flushed when the process stops.

Attributes follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``) plus the request id
and cost; never a prompt, a completion or a key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanKind, Tracer

HEADER = "traceparent"  # W3C Trace Context, in HTTP and in NATS headers alike
STATE_HEADER = "tracestate"  # read at the edge for its own span only; never passed on
# A traceparent's first four fields (W3C Trace Context level 1, "traceparent Header Field
# Values"): version, trace id, parent id, flags, lower-case hex. Version 00 has exactly these;
# a later version (not ff) may append fields after a dash, which are not read.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
# tracestate list members (W3C "tracestate Header Field Values"): a key (simple, or
# tenant@system) "=" a value of printable ASCII without "," and "=" that does not end in a space.
_STATE_MEMBER = re.compile(
    r"(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
STATE_MAX_MEMBERS = 32  # W3C: at most 32 list members
STATE_MAX_CHARS = 512  # W3C: vendors propagate at least 512 characters; the edge reads no more
# What every span of a model call says of it (OpenTelemetry GenAI semantic conventions).
GEN_AI = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic"}

ENABLED = False
_tracer: Tracer | None = None
_provider: Any = None


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def setup(service: str) -> bool:
    """Start exporting this process's spans if the environment asks for it; whether it does."""
    global ENABLED, _tracer, _provider
    if not wanted():
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or f"ezat-{service}"
    _provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(_provider)
    _tracer = trace.get_tracer("ezat." + service)
    ENABLED = True
    return True


def shutdown() -> None:
    """Export what is left (the SDK waits up to its export timeout)."""
    global ENABLED
    if _provider is not None:
        _provider.shutdown()
    ENABLED = False


def start(
    name: str,
    traceparent: str | None,
    kind: SpanKind | None = None,
    attributes: Mapping[str, Any] | None = None,
    tracestate: str | None = None,
) -> Span:
    """A started span, child of ``traceparent`` (a new trace without one), carrying
    ``tracestate`` (validated by the caller: ``valid_state``). Only when ENABLED."""
    from opentelemetry.trace import SpanKind as Kind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    assert _tracer is not None, "tracing.start called with tracing off"
    carrier = {HEADER: traceparent} if traceparent else {}
    if traceparent and tracestate:
        carrier[STATE_HEADER] = tracestate
    context = TraceContextTextMapPropagator().extract(carrier) if carrier else None
    return _tracer.start_span(
        name, context=context, kind=kind or Kind.INTERNAL, attributes=dict(attributes or {})
    )


def traceparent(span: Span) -> str:
    """``span``'s context as a W3C ``traceparent`` value, for the next hop."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def valid(value: str | None) -> str | None:
    """A client's ``traceparent`` as the version-00 value the gateway passes on, or None when it
    is not a valid one (W3C: an invalid traceparent is ignored and a new trace started; the
    gateway never passes on what it has not validated). A later version is read by its first four
    fields (the spec's forward-compatibility rule) and re-written as version 00."""
    if value is None or len(value) < 55:
        return None
    match = _TRACEPARENT.match(value)
    if match is None:
        return None
    version, trace_id, span_id, flags = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None  # version ff is forbidden; all-zero ids are invalid
    if version == "00":
        return value if len(value) == 55 else None  # version 00 has no further fields
    if len(value) > 55 and value[55] != "-":
        return None  # a later version's further fields follow a dash
    return f"00-{trace_id}-{span_id}-{flags}"


def valid_state(value: str | None) -> str | None:
    """A client's ``tracestate`` list, its empty members dropped, or None when it is not valid
    W3C Trace Context (bad member, more than 32 members, a key twice, over 512 characters):
    the whole header is then ignored."""
    if not value or len(value) > STATE_MAX_CHARS:
        return None
    members = [m.strip(" \t") for m in value.split(",")]
    members = [m for m in members if m]
    if not members or len(members) > STATE_MAX_MEMBERS:
        return None
    if not all(_STATE_MEMBER.fullmatch(m) for m in members):
        return None
    if len({m.partition("=")[0] for m in members}) != len(members):
        return None
    return ",".join(members)


def headers(value: str | None) -> dict[str, str] | None:
    """NATS headers carrying ``value`` (None, and no header at all, without one)."""
    return {HEADER: value} if value else None


def received(msg_headers: Mapping[str, str] | None) -> str | None:
    """The ``traceparent`` a NATS message carried."""
    return msg_headers.get(HEADER) if msg_headers else None


def exemplar(span: Span | None) -> dict[str, str] | None:
    """A histogram exemplar naming ``span``'s trace (what Grafana links to the trace)."""
    if span is None:
        return None
    ctx = span.get_span_context()
    return {"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"}


def failed(span: Span, description: str) -> None:
    """Mark ``span`` as an error (the description names a status or error type, never content)."""
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, description))
