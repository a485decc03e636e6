"""The simulator's Amazon Bedrock runtime face: its routes and handlers (simulator/README.md,
"Bedrock face").

- ``POST /model/{modelId}/invoke``: the invoke body (``bedrock_wire.to_messages_body``) ->
  the Messages answer as JSON, with ``X-Amzn-Bedrock-Input-Token-Count``,
  ``-Output-Token-Count`` and ``-Invocation-Latency``.
- ``POST /model/{modelId}/invoke-with-response-stream``: the same answer as event-stream
  ``chunk`` messages (``eventstream.py``), one per Anthropic event, ``message_stop`` carrying
  ``amazon-bedrock-invocationMetrics``; a mid-stream failure is an ``exception`` message.
- ``POST /model/{modelId}/count-tokens``: ``{"input": {"invokeModel": {"body": BASE64}}}`` ->
  ``{"inputTokens": N}`` (botocore's CountTokens shapes); an inference profile is refused with
  Bedrock's ValidationException (``bedrock_wire.counts_tokens``).
- ``POST /anthropic/v1/messages`` and ``.../count_tokens``: the runtime's Anthropic-compatible
  Messages endpoint (AWS documents ``https://bedrock-runtime.{region}.amazonaws.com/anthropic``
  and ``https://bedrock-mantle.{region}.api.aws/anthropic/v1/messages``): the Anthropic face's
  own handlers behind this face's authentication, so plain SSE and Anthropic bodies and errors.

``modelId`` is a model id, an inference-profile id or a URL-encoded ARN; the answer's ``model``
is it, decoded. Every request is authenticated first (``sigv4.verify``), then recorded in the
request log with its body as received. The answers are the engine's, as the Anthropic face's.
Faults: ``faults.py`` (``status`` becomes Bedrock's type, ``bedrock_exception`` names one).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import msgspec
from aiohttp import web

from . import engine, eventstream
from .bedrock_stream import EventStreamResponse
from .bedrock_wire import (
    COUNT_REFUSED,
    BedrockError,
    count_tokens_body,
    counts_tokens,
    error_for_status,
    exception_name,
    model_id,
    to_messages_body,
)
from .faults import Fault
from .instance import Simulator
from .requestlog import RequestRecord
from .sigv4 import Received, Refusal, verify
from .stream import Timing, drop_connection, hold, send_stream
from .tokens import input_tokens
from .validate import InvalidRequest, validate_request

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Set on a request this face has authenticated before handing it to the Anthropic face.
AUTHORIZED = web.RequestKey("ezat_simulator.bedrock_authorized", bool)
JSON = "application/json"
_SERVICE_ERROR = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
_AUTH_ERROR = ":http://internal.amazon.com/coral/com.amazon.coral.service/"
_encode = msgspec.json.encode


def _error(
    record: RequestRecord, err: BedrockError, status: int | None = None, key: str = "message"
) -> web.Response:
    auth = err.error_type.endswith(("SignatureException", "ClientException", "TokenException"))
    headers = {
        "x-amzn-RequestId": record.id,
        "x-amzn-ErrorType": err.error_type + (_AUTH_ERROR if auth else _SERVICE_ERROR),
    }
    body = _encode({key: err.message})
    return web.Response(status=status or err.status, body=body, content_type=JSON, headers=headers)


def _received(request: web.Request, body: bytes) -> Received:
    headers = {k.lower(): ",".join(request.headers.getall(k)) for k in request.headers}
    return Received(request.method, request.raw_path, headers, body)


class BedrockFace:
    """The handlers of one simulator's Bedrock routes."""

    def __init__(self, sim: Simulator, messages: Handler, count: Handler) -> None:
        self.sim = sim
        self._messages = messages
        self._count = count

    # ---- authentication and body ------------------------------------------------------------

    async def _body(
        self, request: web.Request, record: RequestRecord, services: tuple[str, ...]
    ) -> bytes | web.Response:
        """The raw body of an authenticated request, or the refusal to send instead."""
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            limit = self.sim.settings.max_body_bytes
            return self._refuse(
                record,
                BedrockError(
                    "ValidationException",
                    "1 validation error "
                    f"detected: Value at 'body' failed to satisfy constraint: Member "
                    f"must have length less than or equal to {limit}",
                ),
            )
        refusal = verify(
            self.sim.settings.bedrock, _received(request, raw), datetime.now(UTC), services
        )
        if refusal is not None:
            return self._refused(record, refusal)
        return raw

    def _refuse(
        self,
        record: RequestRecord,
        err: BedrockError,
        status: int | None = None,
        key: str = "message",
    ) -> web.Response:
        resp = _error(record, err, status, key)
        self.sim.log.close(record, "error", resp.status, time.time())
        return resp

    def _refused(self, record: RequestRecord, refusal: Refusal) -> web.Response:
        err = BedrockError(refusal.error_type, refusal.message)
        return self._refuse(record, err, 403, refusal.message_key)

    def _open(self, request: web.Request) -> tuple[RequestRecord, int]:
        return self.sim.log.open(request.path, request.headers, time.time())

    # ---- invoke -----------------------------------------------------------------------------

    async def invoke(self, request: web.Request) -> web.StreamResponse:
        return await self._invoke(request, stream=False)

    async def invoke_stream(self, request: web.Request) -> web.StreamResponse:
        return await self._invoke(request, stream=True)

    async def _invoke(self, request: web.Request, stream: bool) -> web.StreamResponse:
        record, seq = self._open(request)
        try:
            return await self._answer(request, record, seq, stream)
        except asyncio.CancelledError:
            self.sim.log.close(record, "cancelled", 499, time.time())
            raise

    async def _answer(
        self, request: web.Request, record: RequestRecord, seq: int, stream: bool
    ) -> web.StreamResponse:
        sim = self.sim
        raw = await self._body(request, record, ("bedrock",))
        if isinstance(raw, web.Response):
            return raw
        try:
            body = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return self._refuse(
                record,
                BedrockError(
                    "ValidationException",
                    "Malformed input "
                    "request: the body is not valid JSON, please reformat your input "
                    "and try again.",
                ),
            )
        sim.log.keep_body(record, body, len(raw))
        fault = sim.faults.take()
        if fault is not None and fault.delay_ms > 0:
            await asyncio.sleep(fault.delay_ms / 1000)
        early = _fault_error(fault)
        if early is not None:
            return self._refuse(record, *early)
        try:
            messages = to_messages_body(body, model_id(request.match_info["model_id"]))
            validate_request(messages)
            directives, seed = engine.read_directives(messages)
        except BedrockError as exc:
            return self._refuse(record, exc)
        except InvalidRequest as exc:
            return self._refuse(record, BedrockError("ValidationException", exc.message))
        if directives.status is not None:
            return self._refuse(record, *_status_error(directives.status))
        if directives.never_answer or (fault is not None and fault.never_answer):
            await hold()
        if directives.html or (fault is not None and fault.html):
            sim.log.close(record, "html", 200, time.time())
            return web.Response(
                body=b"<!DOCTYPE html>\n<html><body>Sign in to continue</body></html>\n",
                content_type="text/html",
                charset="utf-8",
            )
        plan = sim.plan(messages, directives, seed, seq)
        record.message_id = plan.message_id
        timing = sim.timing(directives, fault)
        if timing.stall_before_start:
            return await _headers_then_nothing(request, stream)
        if stream:
            return await self._stream(request, record, plan, timing, fault)
        return await self._json(request, record, plan, timing, fault)

    async def _json(
        self,
        request: web.Request,
        record: RequestRecord,
        plan: engine.Plan,
        timing: Timing,
        fault: Fault | None,
    ) -> web.StreamResponse:
        started = time.monotonic()
        delay = timing.total_ms(plan.deltas)
        if delay > 0:
            await asyncio.sleep(delay / 1000)
        if timing.fail_after is not None:
            name = fault.bedrock_exception if fault is not None else None
            error_type = exception_name(name) if name else "InternalServerException"
            return self._refuse(record, BedrockError(error_type))
        if timing.drop_after is not None:
            drop_connection(request)
            self.sim.log.close(record, "dropped", 200, time.time())
            return web.Response(status=200)
        body = _encode(engine.to_message(plan))
        headers = {
            "x-amzn-RequestId": record.id,
            "X-Amzn-Bedrock-Input-Token-Count": str(plan.usage.input_tokens),
            "X-Amzn-Bedrock-Output-Token-Count": str(plan.usage.output_tokens),
            "X-Amzn-Bedrock-Invocation-Latency": str(round((time.monotonic() - started) * 1000)),
        }
        if timing.stall_after is not None:
            resp = web.StreamResponse(headers={"content-type": JSON, **headers})
            resp.content_length = len(body)
            await resp.prepare(request)
            await resp.write(body[: len(body) // 2])
            await hold()
        record.tokens_sent = plan.usage.output_tokens
        self.sim.log.close(record, "complete", 200, time.time())
        return web.Response(body=body, content_type=JSON, headers=headers)

    async def _stream(
        self,
        request: web.Request,
        record: RequestRecord,
        plan: engine.Plan,
        timing: Timing,
        fault: Fault | None,
    ) -> web.StreamResponse:
        resp = EventStreamResponse(
            plan,
            fault,
            headers={
                "content-type": eventstream.CONTENT_TYPE,
                "x-amzn-RequestId": record.id,
                "X-Amzn-Bedrock-Content-Type": JSON,
            },
        )
        try:
            await resp.prepare(request)
            outcome = await send_stream(request, resp, plan, timing, record)
        except ConnectionResetError:
            outcome = "cancelled"
        self.sim.log.close(record, outcome, 200, time.time())
        return resp

    # ---- CountTokens ------------------------------------------------------------------------

    async def count_tokens(self, request: web.Request) -> web.StreamResponse:
        record, _ = self._open(request)
        try:
            raw = await self._body(request, record, ("bedrock",))
            if isinstance(raw, web.Response):
                return raw
            try:
                body = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                return self._refuse(
                    record, BedrockError("ValidationException", "the body is not valid JSON")
                )
            self.sim.log.keep_body(record, body, len(raw))
            model = model_id(request.match_info["model_id"])
            if not counts_tokens(model):
                return self._refuse(record, BedrockError("ValidationException", COUNT_REFUSED))
            try:
                invoke = count_tokens_body(body)
                messages = to_messages_body(invoke, model)
                validate_request(messages, count_only=True)
                directives, _ = engine.read_directives(messages)
            except BedrockError as exc:
                return self._refuse(record, exc)
            except InvalidRequest as exc:
                return self._refuse(record, BedrockError("ValidationException", exc.message))
            if directives.status is not None:
                return self._refuse(record, *_status_error(directives.status))
            self.sim.log.close(record, "complete", 200, time.time())
            return web.Response(
                body=_encode({"inputTokens": input_tokens(messages)}),
                content_type=JSON,
                headers={"x-amzn-RequestId": record.id},
            )
        except asyncio.CancelledError:
            self.sim.log.close(record, "cancelled", 499, time.time())
            raise

    # ---- the Anthropic-compatible endpoint --------------------------------------------------

    async def anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._as_anthropic(request, self._messages)

    async def anthropic_count_tokens(self, request: web.Request) -> web.StreamResponse:
        return await self._as_anthropic(request, self._count)

    async def _as_anthropic(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if "authorization" not in request.headers and request.headers.get("x-api-key"):
            # Bedrock's own curl examples send the API key as x-api-key on this endpoint.
            request = request.clone(
                headers={
                    **request.headers,
                    "authorization": "Bearer " + request.headers["x-api-key"],
                }
            )
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return await handler(request)  # the Anthropic face answers its own 413
        refusal = verify(
            self.sim.settings.bedrock,
            _received(request, raw),
            datetime.now(UTC),
            ("bedrock", "bedrock-mantle"),
        )
        if refusal is not None:
            record, _ = self._open(request)
            return self._refused(record, refusal)
        request[AUTHORIZED] = True
        return await handler(request)


def _fault_error(fault: Fault | None) -> tuple[BedrockError, int] | None:
    """The HTTP error an armed fault answers with before any reply, if it does."""
    if fault is None:
        return None
    if fault.status is not None:
        return _status_error(fault.status)
    if fault.bedrock_exception is not None and fault.fail_after is None:
        err = BedrockError(exception_name(fault.bedrock_exception))
        return err, err.status
    return None


def _status_error(status: int) -> tuple[BedrockError, int]:
    error_type, sent = error_for_status(status)
    return BedrockError(error_type), sent


async def _headers_then_nothing(request: web.Request, stream: bool) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={"content-type": eventstream.CONTENT_TYPE if stream else JSON}
    )
    if not stream:
        resp.content_length = 1024
    await resp.prepare(request)
    await hold()
    return resp  # never reached


def add_routes(app: web.Application, sim: Simulator, messages: Handler, count: Handler) -> None:
    """Serve the Bedrock face on ``app``; ``messages``/``count`` are the Anthropic face's."""
    face = BedrockFace(sim, messages, count)
    app.router.add_post("/model/{model_id}/invoke", face.invoke)
    app.router.add_post("/model/{model_id}/invoke-with-response-stream", face.invoke_stream)
    app.router.add_post("/model/{model_id}/count-tokens", face.count_tokens)
    app.router.add_post("/anthropic/v1/messages", face.anthropic_messages)
    app.router.add_post("/anthropic/v1/messages/count_tokens", face.anthropic_count_tokens)
