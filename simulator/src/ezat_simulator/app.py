"""HTTP wiring of one simulator instance: the Messages routes, startup; the ``/_sim`` admin
routes are admin.py's, the instance's state instance.py's.

API (Anthropic-compatible; any non-empty ``x-api-key`` or ``Authorization: Bearer`` key is
accepted):

- ``POST /v1/messages``: JSON, or SSE with ``"stream": true``.
- ``POST /v1/messages/count_tokens``: ``{"input_tokens": N}`` (of the directives, only
  ``status`` applies).

The Amazon Bedrock face (``/model/{modelId}/...``, ``/anthropic/v1/messages``) is ``bedrock.py``.

Admin (no key; for tests):

- ``POST /_sim/faults`` ``{"status", "count", "retry_after", "delay_ms", "fail_after",
  "drop_after", "stall_after", "stall_before_start", "never_answer", "html", "bedrock_exception"}``
  (all optional, see ``faults.py``) -> ``{"fault": {...}, "remaining": N}``; ``GET`` shows it,
  ``DELETE`` clears it.
- ``GET /_sim/requests?limit=N`` -> the last N (default 100) requests, newest last
  (``requestlog.RequestRecord``).
- ``POST /_sim/reset`` clears the request log, the fault and the prompt cache.
- ``GET /_sim/stats`` -> ``{"name", "requests", "active", "cache_entries"}`` (and
  ``tokens_issued`` with a Vertex face, vertex.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web

from . import admin, bedrock, engine, sse
from .anthropic_wire import error_body, error_type
from .bedrock_wire import runtime_version_refused
from .faults import retry_after_header
from .instance import SIM as SIM
from .instance import Settings as Settings
from .instance import Simulator as Simulator
from .requestlog import RequestRecord
from .stream import SseResponse, Timing, drop_connection, hold, send_stream
from .tokens import input_tokens
from .validate import InvalidRequest, betas_of, validate_request

JSON = "application/json"
_decode = msgspec.json.decode
_encode = msgspec.json.encode
# What a proxy or captive portal in front of a deployment answers: a page, not the API.
HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in to continue</title></head>\n"
    b"<body><h1>Sign in to continue</h1><p>This network requires you to sign in.</p>"
    b"</body></html>\n"
)
_ERROR_MESSAGES = {
    429: "Number of request tokens has exceeded your per-minute rate limit (simulated)",
    500: "Internal server error (simulated)",
    529: "Overloaded",
}


# ---- helpers --------------------------------------------------------------------------------


def _error(
    sim: Simulator,
    record: RequestRecord,
    status: int,
    message: str,
    retry_after: float | None = None,
) -> web.Response:
    headers = {"request-id": record.id}
    header = retry_after_header(status, retry_after)
    if header is not None:
        headers["retry-after"] = header
    sim.log.close(record, "error", status, time.time())
    body = error_body(error_type(status), message, record.id)
    return web.Response(status=status, body=body, content_type=JSON, headers=headers)


def _simulated(status: int) -> str:
    return _ERROR_MESSAGES.get(status, f"Simulated error (HTTP {status})")


def _directed_error(
    sim: Simulator, record: RequestRecord, directives: engine.Directives, body: Any
) -> web.Response:
    """The ``status`` directive's error; with ``echo`` its message quotes the prompt."""
    assert directives.status is not None
    message = _simulated(directives.status)
    if directives.echo:
        text = engine.last_user_text(body["messages"])[1]
        message = f"{message}: the request said {text[:200]!r}"
    return _error(sim, record, directives.status, message)


def _has_key(request: web.Request) -> bool:
    # Recent SDKs send the key as "Authorization: Bearer"; older ones and curl as x-api-key.
    if request.headers.get("x-api-key"):
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


async def _read_json(
    request: web.Request, sim: Simulator, record: RequestRecord
) -> Any | web.Response:
    """The decoded body, or the error response to send instead (auth, size, JSON)."""
    if not request.get(bedrock.AUTHORIZED) and not _has_key(request):
        return _error(sim, record, 401, "x-api-key header is required")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        limit = sim.settings.max_body_bytes
        return _error(sim, record, 413, f"Request exceeds the maximum allowed size ({limit} bytes)")
    try:
        body = _decode(raw)
    except msgspec.DecodeError:
        return _error(sim, record, 400, "request body: not valid JSON")
    sim.log.keep_body(record, body, len(raw))
    return body


def _open(request: web.Request) -> tuple[Simulator, RequestRecord, int]:
    sim = request.app[SIM]
    return sim, *sim.log.open(request.path, request.headers, time.time())


# ---- Messages API ---------------------------------------------------------------------------


async def create_message(request: web.Request) -> web.StreamResponse:
    sim, record, seq = _open(request)
    try:
        return await _create(request, sim, record, seq)
    except asyncio.CancelledError:
        # aiohttp cancels the handler when the client goes away (handler_cancellation=True).
        sim.log.close(record, "cancelled", 499, time.time())
        raise


async def _create(
    request: web.Request, sim: Simulator, record: RequestRecord, seq: int
) -> web.StreamResponse:
    body = await _read_json(request, sim, record)
    if isinstance(body, web.Response):
        return body
    fault = sim.faults.take()
    if fault is not None and fault.delay_ms > 0:
        await asyncio.sleep(fault.delay_ms / 1000)
    if fault is not None and fault.status is not None:
        return _error(sim, record, fault.status, _simulated(fault.status), fault.retry_after)
    if request.get(bedrock.AUTHORIZED) and isinstance(body, dict):
        body = dict(body)
        refused = runtime_version_refused(body)
        if refused:
            return _error(sim, record, 400, refused)
    try:
        validate_request(body, betas=betas_of(request.headers.get("anthropic-beta")))
        directives, seed = engine.read_directives(body)
    except InvalidRequest as exc:
        return _error(sim, record, 400, exc.message)
    if directives.status is not None:
        return _directed_error(sim, record, directives, body)
    if directives.never_answer or (fault is not None and fault.never_answer):
        await hold()  # until the client gives up (the handler is cancelled)
    if directives.html or (fault is not None and fault.html):
        sim.log.close(record, "html", 200, time.time())
        return web.Response(
            body=HTML_PAGE, content_type="text/html", charset="utf-8", headers={"x-sim": "html"}
        )
    plan = sim.plan(body, directives, seed, seq)
    record.message_id = plan.message_id
    record.server_tool_use = plan.usage.server_tool_use
    timing = sim.timing(directives, fault)
    if timing.stall_before_start:
        return await _headers_then_nothing(request, bool(body.get("stream")))
    if body.get("stream"):
        return await _stream(request, sim, record, plan, timing)
    return await _json_reply(request, sim, record, plan, timing)


async def _headers_then_nothing(request: web.Request, stream: bool) -> web.StreamResponse:
    """200 and the headers (a JSON answer's with its length), then silence until the client
    gives up."""
    resp = web.StreamResponse(
        headers={"content-type": sse.CONTENT_TYPE if stream else f"{JSON}; charset=utf-8"}
    )
    if not stream:
        resp.content_length = 1024
    await resp.prepare(request)  # a plain StreamResponse sends its headers here
    await hold()
    return resp  # never reached


# A face's error answer (``_error``, the Vertex face's Google-shaped one): sim, record, status,
# message.
ErrorReply = Callable[[Simulator, RequestRecord, int, str], web.Response]


async def _json_reply(
    request: web.Request,
    sim: Simulator,
    record: RequestRecord,
    plan: engine.Plan,
    timing: Timing,
    error: ErrorReply | None = None,
) -> web.StreamResponse:
    """A non-streamed answer with the plan's timing and faults; a failure in ``error``'s shape
    (the Anthropic API's by default)."""
    delay = timing.total_ms(plan.deltas)
    if delay > 0:
        await asyncio.sleep(delay / 1000)
    if timing.fail_after is not None:
        return (error or _error)(sim, record, 500, _simulated(500))
    if timing.drop_after is not None:
        drop_connection(request)
        sim.log.close(record, "dropped", 200, time.time())
        return web.Response(status=200)
    body = _encode(engine.to_message(plan))
    if timing.stall_after is not None:
        # The headers and half the body, then silence until the client gives up.
        resp = web.StreamResponse(
            headers={"content-type": f"{JSON}; charset=utf-8", "request-id": record.id}
        )
        resp.content_length = len(body)
        await resp.prepare(request)
        await resp.write(body[: len(body) // 2])
        await hold()
    record.tokens_sent = plan.usage.output_tokens
    sim.log.close(record, "complete", 200, time.time())
    return web.Response(body=body, content_type=JSON, headers={"request-id": record.id})


async def _stream(
    request: web.Request, sim: Simulator, record: RequestRecord, plan: engine.Plan, timing: Timing
) -> web.StreamResponse:
    resp = SseResponse(
        headers={
            "content-type": sse.CONTENT_TYPE,
            "cache-control": "no-cache",
            "request-id": record.id,
        }
    )
    try:
        await resp.prepare(request)
        outcome = await send_stream(request, resp, plan, timing, record)
    except ConnectionResetError:
        outcome = "cancelled"
    sim.log.close(record, outcome, 200, time.time())
    return resp


async def count_tokens(request: web.Request) -> web.StreamResponse:
    sim, record, _ = _open(request)
    try:
        body = await _read_json(request, sim, record)
        if isinstance(body, web.Response):
            return body
        try:
            if request.get(bedrock.AUTHORIZED) and isinstance(body, dict):
                body = dict(body)
                refused = runtime_version_refused(body)
                if refused:
                    raise InvalidRequest(refused)
            betas = betas_of(request.headers.get("anthropic-beta"))
            validate_request(body, count_only=True, betas=betas)
            directives, _ = engine.read_directives(body)
        except InvalidRequest as exc:
            return _error(sim, record, 400, exc.message)
        if directives.status is not None:
            return _directed_error(sim, record, directives, body)
        tokens = input_tokens(body)
        sim.log.close(record, "complete", 200, time.time())
        return web.Response(
            body=_encode({"input_tokens": tokens}),
            content_type=JSON,
            headers={"request-id": record.id},
        )
    except asyncio.CancelledError:
        sim.log.close(record, "cancelled", 499, time.time())
        raise


def make_app(settings: Settings) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SIM] = Simulator(settings)
    app.router.add_post("/v1/messages", create_message)
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
    admin.add_routes(app)
    bedrock.add_routes(app, app[SIM], create_message, count_tokens)
    if settings.vertex is not None:
        from .vertex import add_vertex_face  # vertex.py builds on this module's helpers

        add_vertex_face(app, settings.vertex)
    return app


async def start(settings: Settings, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Serve a new instance on ``host:port`` (0 = any free port); return its runner and URL."""
    # Cancelling the handler when the client goes away is how a cancelled stream is noticed
    # even while the simulator is sleeping between tokens.
    runner = web.AppRunner(make_app(settings), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return runner, f"http://{shown}:{bound_port}"
