"""An OTLP/HTTP trace receiver for the tests: what the services export, decoded with
opentelemetry-proto, in a thread of its own so that sync fixtures can start it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root
    kind: int  # opentelemetry.proto.trace.v1.Span.SpanKind
    attributes: dict[str, Any]
    error: bool
    trace_state: str = ""  # the W3C tracestate the span carries


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.url = ""
        self._lock = threading.Lock()

    async def _traces(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        got = []
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for s in scope.spans:
                    got.append(
                        Span(
                            service=str(resource.get("service.name", "")),
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            error=s.status.code == 2,
                            trace_state=s.trace_state,
                        )
                    )
        with self._lock:
            self.spans += got
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    def of_trace(self, trace_id: str, at_least: int, timeout: float = 20.0) -> list[Span]:
        """The spans of ``trace_id``, once ``at_least`` of them arrived (or the timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [s for s in self.spans if s.trace_id == trace_id]
            if len(found) >= at_least or time.monotonic() > deadline:
                return found
            time.sleep(0.1)


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver listening on loopback (``receiver.url`` is its OTLP endpoint)."""
    receiver = Receiver()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runner: web.AppRunner | None = None

    async def start() -> None:
        nonlocal runner
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/traces", receiver._traces)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        receiver.url = f"http://127.0.0.1:{port}"
        ready.set()

    thread = threading.Thread(target=loop.run_forever, name="otlp-receiver", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop)
    assert ready.wait(10), "the OTLP receiver did not start"
    try:
        yield receiver
    finally:
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
