"""Translator wiring: takes ``ClientRequest``s from the edge, validates and translates them, and
forwards ``RouteRequest``s to the router with the edge's inbox as the reply address, so that
replies of the Anthropic API go straight back to the edge (no hop through here).

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
from ezat_common.envelopes import CONVERTED
from ezat_common.errors import GatewayError
from ezat_common.liveness import OWNER_TIMEOUT, Heartbeats
from ezat_common.loop_lag import LoopLag
from ezat_common.periodic import Periodic
from ezat_common.subjects import QUEUE_TRANSLATOR, Subjects, from_env
from ezat_common.tasks import TaskSet
from ezat_common.undecodable import decoded
from nats.aio.msg import Msg

from . import metrics as m
from . import spans
from .conversation_tokens import ConversationTokens
from .core.messages import Prepared, encode_body, prepare_count, prepare_create
from .core.sealing import Sealer
from .openai_path import NO_ROUTER_TAG, OpenAIPath
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
        self.chat = OpenAIPath(
            nc,
            self.subjects,
            self.claims,
            catalogue,
            self.thinking,
            instance,
            self.no_router_prefix,
            self.beats,
            responses or ResponsesRequests(catalogue, _sealer()),
            off_loop_bytes,
        )
        self.lag = LoopLag(m.LOOP_LAG.observe)
        self.stored = self.chat.responses.store if self.chat.responses else None
        self.tasks = TaskSet()
        self._sub: Any = None

    async def start(self) -> None:
        s = self.subjects
        # Its buckets exist before anyone may send to it (the senders may not make them).
        await self.claims.open()
        await self.chat.images.open()
        self._sub = await self.nc.subscribe(s.translate, queue=QUEUE_TRANSLATOR, cb=self.on_request)
        await self.nc.subscribe(self.no_router_prefix + ">", cb=self.on_no_router)
        await self.nc.subscribe(s.cancel, cb=self.on_cancel)
        await self.chat.start()
        self.ready.use(self.checks)
        await bus.serve_health(self.nc, s, "translator", self.ready.problem)
        self.beats.start()
        self.lag.start()
        # Its own task, not in ``tasks``: those are the requests a stop waits for.
        self._watcher = Periodic("router-watch", OWNER_TIMEOUT / 6, self.chat.watch)
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
            return len(self.tasks) + len(self.chat.states) + len(self.chat.tasks)

        left = await lifecycle.wait_idle(busy, drain_timeout)
        lifecycle.drain_log("translator", left, started)
        await self._watcher.stop()
        if self._sweeper is not None:
            await self._sweeper.stop()
        self.tasks.cancel()
        self.chat.tasks.cancel()
        await self.chat.end_all(lifecycle.RESTARTING)
        await self.beats.stop()
        await self.lag.stop()

    async def on_cancel(self, msg: Msg) -> None:
        cancel = decoded(envelopes.decode_cancel, "cancel", msg)
        if cancel is None:
            return
        self.chat.cancel(cancel.uid)

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
        if req.body_ref is not None or req.api in CONVERTED or len(req.body) > self.off_loop_bytes:
            # Object-store reads, image downloads, Redis look-ups and a large body's translation
            # (in a thread) must not hold up the subscription, which runs its callbacks one at a
            # time.
            self.tasks.spawn(self.handle(req, traceparent))
        else:
            await self.handle(req, traceparent)

    async def handle(self, req: envelopes.ClientRequest, traceparent: str | None = None) -> None:
        """Translate and route ``req``; ``traceparent`` (what its message carried) goes on to
        the router and the fetcher: the translation span's, with tracing on."""
        token = logs.request_id.set(req.request_id)
        m.REQUESTS_BY(req.api).inc()
        span = spans.translation(req, traceparent) if tracing.ENABLED else None
        if span is not None:
            traceparent = tracing.traceparent(span)
        # The edge hears from us from the start: reading and translating a large body takes
        # seconds, and silence would have it publish the request again (docs/reliability.md).
        # A request done within a second never gets a beat.
        self.beats.open(req.reply_to)
        held = True  # False once whoever carries the request on closes the beats
        try:
            body = await self._body(req)
            if req.api in CONVERTED:
                await self.chat.route(req, body, traceparent, span)
                held = False  # routed: the chat path's state holds them (and closes them)
                return
            prepared = await self.prepare(req, body)
            if span is not None:
                span.set_attribute("gen_ai.request.model", prepared.model.id)
            if prepared.image_urls:
                # Downloads must not hold up the subscription (see on_request); the task ends
                # the span and the beats.
                task = self.route_with_images(req, prepared, traceparent, span)
                span = None
                held = False
                self.tasks.spawn(task)
                return
            await self.route(req, prepared, prepared.body, traceparent)
        except BaseException as exc:
            if span is not None:
                spans.failed(span, exc)
            await self.fail(req, exc)
        finally:
            if held:  # routed: the router beats the edge now
                self.beats.close(req.reply_to)
            if span is not None:
                span.end()
            logs.request_id.reset(token)

    async def route_with_images(
        self,
        req: envelopes.ClientRequest,
        prepared: Prepared,
        traceparent: str | None = None,
        span: Span | None = None,
    ) -> None:
        """Image blocks with a URL source go to the deployment inline (docs/api.md, "Messages
        API")."""
        token = logs.request_id.set(req.request_id)
        self.beats.open(req.reply_to, prepared.stream)
        try:
            assert prepared.data is not None
            await self.chat.images.of_request(req, prepared.data, prepared.image_urls, traceparent)
            await self.route(req, prepared, encode_body(prepared.data), traceparent)
        except BaseException as exc:
            if span is not None:
                spans.failed(span, exc)
            await self.fail(req, exc)
        finally:
            if span is not None:
                span.end()
            self.beats.close(req.reply_to)
            logs.request_id.reset(token)

    async def route(
        self,
        req: envelopes.ClientRequest,
        prepared: Prepared,
        body: bytes,
        traceparent: str | None = None,
    ) -> None:
        inline, ref = await self.claims.pack(body, "router")
        route = route_request(
            req,
            model=prepared.model.id,
            response_model=prepared.response_model,
            stream=prepared.stream,
            reply_to=req.reply_to,
            body=inline,
            body_ref=ref,
            session_key=req.session,
            prefix_hash=prepared.prefix_hash,
            cache_ttl=prepared.cache_ttl,
            input_estimate=prepared.input_estimate,
            user_id=prepared.user_id,
        )
        await self.nc.publish(
            self.subjects.route,
            envelopes.encode(route),
            reply=self.no_router_prefix + req.reply_to,
            headers=tracing.headers(traceparent),
        )

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

    async def prepare(self, req: envelopes.ClientRequest, body: bytes) -> Prepared:
        """The Messages request; a large body is decoded (in pieces) and prepared in a worker
        thread (docs/reliability.md, "Large bodies")."""
        prepare = prepare_count if req.api == "count_tokens" else prepare_create
        if len(body) > self.off_loop_bytes:
            return await asyncio.to_thread(
                prepare, body, self.catalogue, in_pieces=True, allowed=req.models
            )
        return prepare(body, self.catalogue, allowed=req.models)

    async def reply_error(self, reply_to: str, err: GatewayError) -> None:
        await self.nc.publish(reply_to, envelopes.encode(err.reply))

    async def on_no_router(self, msg: Msg) -> None:
        if not bus.is_no_responders(msg):
            return
        m.NO_ROUTER.inc()
        rest = msg.subject[len(self.no_router_prefix) :]
        if rest.startswith(NO_ROUTER_TAG):
            # A chat route: its state goes, and the edge inbox is the state's.
            found = self.chat.no_router(rest[len(NO_ROUTER_TAG) :])
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
