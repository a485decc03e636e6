"""Translator wiring and its one request path: takes ``ClientRequest``s from the edge, has the
API's entry (apis.py) validate and translate each, and forwards ``RouteRequest``s to the router.
The Anthropic API's route names the edge's inbox as the reply address, so its replies go
straight back to the edge (no hop through here); the OpenAI APIs' replies come back here to be
converted (relayed.py, converting.py).

``main`` reads the configuration and the environment and hands ``Translator`` its connected
collaborators (subjects, the thinking store), as every service's wiring does
(docs/development.md)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from ezat_common import bus, envelopes, lifecycle, logs, readiness, redis_keys, seal_keys, tracing
from ezat_common.bodies import TOO_DEEP
from ezat_common.catalogue import Catalogue
from ezat_common.config import DEFAULT_OFF_LOOP_BODY, load_config
from ezat_common.config_reload import Reloader
from ezat_common.errors import GatewayError
from ezat_common.liveness import OWNER_TIMEOUT, Heartbeats
from ezat_common.loop_lag import LoopLag
from ezat_common.periodic import Periodic
from ezat_common.subjects import IMAGES, QUEUE_TRANSLATOR, Subjects, from_env
from ezat_common.tasks import TaskSet
from ezat_common.undecodable import decoded
from nats.aio.msg import Msg

from . import apis, spans
from . import metrics as m
from .apis import Translated
from .conversation_tokens import ConversationTokens
from .conversions import Conversion
from .core.messages import encode_body
from .core.sealing import Sealer
from .images import Images
from .relayed import NO_ROUTER_TAG, Relayed
from .responses_requests import ResponsesRequests
from .route_request import route_request
from .stored_responses import SWEEP_EVERY, StoredResponses
from .thinking_store import ThinkingStore

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("ezat.translator")


class Translator:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        catalogue: Catalogue,
        thinking: ThinkingStore,
        ready: readiness.Readiness | None = None,
        responses: ResponsesRequests | None = None,
        off_loop_bytes: int = DEFAULT_OFF_LOOP_BODY,
    ) -> None:
        self.nc = nc
        # Bodies above it are decoded and translated in a worker thread (docs/reliability.md,
        # "Large bodies"): ``[translator] off_loop_body_bytes``.
        self.off_loop_bytes = off_loop_bytes
        self.ready = ready or readiness.Readiness("translator")
        self.catalogue = catalogue
        self.subjects = subjects
        self.claims = bus.Claims(nc, self.subjects, "translator")
        instance = f"translator.{uuid.uuid4().hex[:12]}"
        # Publishing a route with this reply prefix makes NATS tell *us* when no router listens;
        # the edge's inbox is the rest of the subject, so we can tell the client.
        self.no_router_prefix = self.subjects.inbox(instance) + ".nr."
        self.thinking = thinking
        # The edge hears from us while we hold its request (docs/reliability.md).
        self.beats = Heartbeats(nc)
        responses = responses or ResponsesRequests(catalogue, _sealer())
        # Every API's request side, one entry each (apis.py); all go through ``handle``.
        self.apis = apis.table(catalogue, thinking, responses)
        # The image downloads of every API's requests; the fetcher's downloads come in a
        # bucket of their own (docs/architecture.md).
        self.images = Images(nc, subjects, bus.Claims(nc, subjects, IMAGES), instance)
        self.stored = responses.store
        # The OpenAI APIs' replies come back through here: the token table that converts them.
        self.replies = Relayed(
            nc, self.subjects, self.claims, instance, self.no_router_prefix, self.beats
        )
        self.lag = LoopLag(m.LOOP_LAG.observe)
        self.tasks = TaskSet()
        self._sub: Any = None

    async def start(self) -> None:
        s = self.subjects
        # Its buckets exist before anyone may send to it (the senders may not make them).
        await self.claims.open()
        await self.images.start()
        self._sub = await self.nc.subscribe(s.translate, queue=QUEUE_TRANSLATOR, cb=self.on_request)
        await self.nc.subscribe(self.no_router_prefix + ">", cb=self.on_no_router)
        await self.nc.subscribe(s.cancel, cb=self.on_cancel)
        await self.replies.start()
        self.ready.use(self.checks)
        await bus.serve_health(self.nc, s, "translator", self.ready.problem)
        self.beats.start()
        self.lag.start()
        # Its own task, not in ``tasks``: those are the requests a stop waits for.
        self._watcher = Periodic("router-watch", OWNER_TIMEOUT / 6, self.replies.watch)
        self._watcher.start()
        self._sweeper: Periodic | None = None
        if isinstance(self.stored, StoredResponses):
            self._sweeper = Periodic("response-sweep", SWEEP_EVERY, self.stored.sweep)
            self._sweeper.start()

    async def stop(self, drain_timeout: float) -> None:
        """Stop taking requests; keep relaying the OpenAI replies of those in flight until they
        end (up to ``drain_timeout``), then end the rest with an error (docs/reliability.md).
        Heartbeats and the router watch go on meanwhile: the edge must not take a draining
        translator for dead, and a router dying meanwhile is still noticed."""
        started = time.monotonic()
        await self.ready.stop()
        await lifecycle.stop_taking(self._sub)

        def busy() -> int:
            return len(self.tasks) + len(self.replies.states) + len(self.replies.tasks)

        left = await lifecycle.wait_idle(busy, drain_timeout)
        lifecycle.drain_log("translator", left, started)
        await self._watcher.stop()
        if self._sweeper is not None:
            await self._sweeper.stop()
        self.tasks.cancel()
        self.replies.tasks.cancel()
        await self.replies.end_all(lifecycle.RESTARTING)
        await self.beats.stop()
        await self.lag.stop()

    async def on_cancel(self, msg: Msg) -> None:
        cancel = decoded(envelopes.decode_cancel, "cancel", msg)
        if cancel is None:
            return
        self.replies.cancel(cancel.uid)

    async def checks(self) -> dict[str, str]:
        """Readiness: NATS and the translate subscription. The thinking store (Redis) is not
        needed to translate: without it kept thinking blocks are dropped (docs/architecture.md)."""
        return readiness.nats_check(self.nc, self._sub)

    async def on_request(self, msg: Msg) -> None:
        req = decoded(envelopes.decode_client_request, "client_request", msg)
        if req is None:
            # Where to answer is inside the message: the edge's first-reply timeout answers.
            return
        traceparent = tracing.received(msg.headers)
        if req.body_ref is not None or len(req.body) > self.off_loop_bytes:
            # Object-store reads and a large body's translation (in a thread) must not hold up
            # the subscription, which runs its callbacks one at a time; a translation that
            # waits on a store or Redis, image downloads and a thinking restore are sent off it
            # from ``handle``.
            self.tasks.spawn(self.handle(req, traceparent, spawned=True))
        else:
            await self.handle(req, traceparent)

    async def handle(
        self, req: envelopes.ClientRequest, traceparent: str | None = None, spawned: bool = False
    ) -> None:
        """Translate ``req`` through its API's entry (apis.py) and route it; ``traceparent``
        (what its message carried) goes on to the router and the fetcher: the translation
        span's, with tracing on. ``spawned``: already off the subscription (on_request)."""
        token = logs.request_id.set(req.request_id)
        m.REQUESTS_BY(req.api).inc()
        span = spans.translation(req, traceparent) if tracing.ENABLED else None
        if span is not None:
            traceparent = tracing.traceparent(span)
        # The edge hears from us from the start: reading and translating a large body takes
        # seconds, and silence would have it publish the request again (docs/reliability.md).
        # A request done within a second never gets a beat.
        self.beats.open(req.reply_to)
        held = True  # False once ``route`` closes the beats or hands them on
        try:
            body = await self._body(req)
            entry = self.apis[req.api]
            if spawned:
                done = await entry.translate(req, body, len(body) > self.off_loop_bytes)
            else:
                now = entry.translate_now(req, body)
                if isinstance(now, apis.Later):
                    # It waits on a store or Redis first: not on the subscription (see
                    # on_request); the task ends the span and the beats.
                    self.tasks.spawn(self.route_in_task(req, now, None, traceparent, span))
                    span = None
                    held = False
                    return
                done = now
            tr, conv = done
            if span is not None:
                span.set_attribute("gen_ai.request.model", tr.model.id)
            held = False
            if (tr.image_urls or tr.restore_thinking is not None) and not spawned:
                # Downloads and Redis must not hold up the subscription (see on_request); the
                # task ends the span and the beats.
                self.tasks.spawn(self.route_in_task(req, tr, conv, traceparent, span))
                span = None
                return
            await self.route(req, tr, conv, traceparent)
        except BaseException as exc:
            if span is not None:
                spans.failed(span, exc)
            await self.fail(req, exc)
        finally:
            if held:
                self.beats.close(req.reply_to)
            if span is not None:
                span.end()
            logs.request_id.reset(token)

    async def route_in_task(
        self,
        req: envelopes.ClientRequest,
        tr: Translated | apis.Later,
        conv: Conversion | None,
        traceparent: str | None = None,
        span: Span | None = None,
    ) -> None:
        """``route`` where image downloads (docs/api.md, "Messages API") or a thinking restore
        (Redis) may take long; ``tr`` a ``Later``: the translation's rest first (the response
        store), with the beats ``handle`` opened until the route takes them."""
        token = logs.request_id.set(req.request_id)
        held = isinstance(tr, apis.Later)
        try:
            if isinstance(tr, apis.Later):
                tr, conv = await tr.finish()
                if span is not None:
                    span.set_attribute("gen_ai.request.model", tr.model.id)
                held = False
            await self.route(req, tr, conv, traceparent)
        except BaseException as exc:
            if span is not None:
                spans.failed(span, exc)
            await self.fail(req, exc)
        finally:
            if held:
                self.beats.close(req.reply_to)
            if span is not None:
                span.end()
            logs.request_id.reset(token)

    async def route(
        self,
        req: envelopes.ClientRequest,
        tr: Translated,
        conv: Conversion | None,
        traceparent: str | None = None,
    ) -> None:
        """Download the images into the body, restore thinking, send the route. ``conv`` None:
        the router replies to the edge's inbox; else to the reply side's token table, which
        converts each reply (relayed.py) and holds the beats until the last one."""
        if conv is not None or tr.image_urls:
            # The wait ahead is long (downloads, a whole relayed answer): the edge learns from
            # the beats whether the request streams. A plain Messages request keeps its plain
            # beats until its router beats the edge itself.
            self.beats.open(req.reply_to, tr.stream)
        handed_on = False
        try:
            if tr.image_urls:
                assert tr.data is not None
                await self.images.of_request(req, tr.data, tr.image_urls, traceparent)
            if tr.restore_thinking is not None:
                await tr.restore_thinking()
            body = tr.body
            if body is None:
                assert tr.data is not None
                body = encode_body(tr.data)
            inline, ref = await self.claims.pack(body, "router")
            route = route_request(
                req,
                model=tr.model.id,
                response_model=tr.response_model,
                stream=tr.stream,
                reply_to=req.reply_to if conv is None else "",
                body=inline,
                body_ref=ref,
                session_key=tr.session_key,
                prefix_hash=tr.prefix_hash,
                cache_ttl=tr.cache_ttl,
                input_estimate=tr.input_estimate,
                user_id=tr.user_id,
            )
            if conv is not None:
                await self.replies.open(req, route, conv, traceparent)
                handed_on = True  # the request's state holds the beats (and closes them)
                return
            await self.nc.publish(
                self.subjects.route,
                envelopes.encode(route),
                reply=self.no_router_prefix + req.reply_to,
                headers=tracing.headers(traceparent),
            )
        finally:
            if not handed_on:  # routed to the edge: the router beats it now
                self.beats.close(req.reply_to)

    async def _body(self, req: envelopes.ClientRequest) -> bytes:
        """The request's body; a claim that cannot be read (gone, NATS away, past
        ``bus.TAKE_TIMEOUT``) is a 503 the client may retry, as at the edge."""
        try:
            return await self.claims.unpack(req.body, req.body_ref)
        except Exception as exc:
            log.warning("object store unavailable: %s", type(exc).__name__)
            raise GatewayError(503, bus.CLAIM_UNAVAILABLE, retry_after=2) from None

    async def fail(self, req: envelopes.ClientRequest, exc: BaseException) -> None:
        """Tell the edge why the request failed (re-raises what is not an error: cancellation)."""
        if isinstance(exc, RecursionError):
            # A structure deeper than the decoder caught, met by a recursive walk later on.
            exc = GatewayError(400, TOO_DEEP)
        if isinstance(exc, GatewayError):
            m.REJECTED.labels(req.api, str(exc.status)).inc()
            await self.reply_error(req.reply_to, exc)
        elif isinstance(exc, Exception):
            log.error("translation failed", exc_info=exc)
            await self.reply_error(req.reply_to, GatewayError(500, "internal error; retry"))
        else:
            raise exc

    async def reply_error(self, reply_to: str, err: GatewayError) -> None:
        await self.nc.publish(reply_to, envelopes.encode(err.reply))

    async def on_no_router(self, msg: Msg) -> None:
        if not bus.is_no_responders(msg):
            return
        m.NO_ROUTER.inc()
        rest = msg.subject[len(self.no_router_prefix) :]
        if rest.startswith(NO_ROUTER_TAG):
            # A converted route: its state goes, and the edge inbox is the state's.
            found = self.replies.no_router(rest[len(NO_ROUTER_TAG) :])
            if found is None:
                return
            edge_inbox = found
        else:
            edge_inbox = rest
        await self.nc.publish(edge_inbox, envelopes.encode(envelopes.NO_ROUTER))


def _sealer() -> Sealer:
    return Sealer(seal_keys.from_env(), seal_keys.retired_from_env())


async def main(stop: asyncio.Event) -> None:
    logs.setup("translator")
    tracing.setup("translator")
    cfg = load_config()
    ready = readiness.Readiness("translator")
    subjects = from_env()
    thinking = ThinkingStore.from_env()
    nc = await bus.connect("translator")
    # After the connection: a replacement waits there for its predecessor (router/app.py).
    readiness.serve(cfg.translator.metrics_listen, ready)
    catalogue = Catalogue(cfg)
    stored = StoredResponses(cfg.translator)
    tokens = ConversationTokens(thinking.redis, redis_keys.from_env())
    responses = ResponsesRequests(
        catalogue, _sealer(), stored, tokens, cfg.translator.off_loop_body_bytes
    )
    translator = Translator(
        nc, subjects, catalogue, thinking, ready, responses, cfg.translator.off_loop_body_bytes
    )
    await translator.start()
    # A reload replaces the catalogue (models, their limits) for the next requests.
    Reloader("translator", cfg, catalogue.replace).install(asyncio.get_running_loop())
    log.info("translator ready")
    await stop.wait()
    log.info("translator stopping")
    await translator.stop(cfg.shutdown.drain_timeout)
    await nc.drain()
    await thinking.close()
    await stored.close()
    tracing.shutdown()
