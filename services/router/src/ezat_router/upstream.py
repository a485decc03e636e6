"""The deployments as the router calls them: each one's address and request head, computed once
(``Endpoint``), and the pooled client (``ezat_http1``) under the router's timeouts (``Upstream``).

Timeouts come from ``RouterConfig`` (``core/timeouts.py``): ``connect_timeout`` for the TCP/TLS
connect; until the response headers, the bound the caller passes (``first_byte_timeout`` for a
non-streamed answer, ``stream_first_byte_timeout`` for a stream or count_tokens);
``between_events_timeout`` for each read of the body (applied by the caller around its reads).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ezat_common.config import DeploymentConfig, RouterConfig
from ezat_common.envelopes import RouteRequest
from ezat_common.sse import SseParser
from ezat_common.tasks import stop_task
from ezat_http1 import Pool, Response, UpstreamError, address, request_head, request_prefix

from . import metrics
from .core import kinds
from .core.dropped import KEY_CHARS, DroppedLog
from .core.kinds.answers import ErrorAnswer, anthropic_error
from .core.kinds.vertex_answers import vertex_error

if TYPE_CHECKING:
    from .core.kinds.bedrock_answers import EventStreamParser

log = logging.getLogger("ezat.router")
USER_AGENT = "ezat-router"

KEEPALIVE_SECONDS = 30.0
SWEEP_SECONDS = 10.0  # how often idle connections past their keep-alive are closed


class UpstreamUnavailable(Exception):
    """No response headers: the deployment was unreachable (connect) or too slow (timeout)."""

    def __init__(self, kind: Literal["connect", "timeout"]) -> None:
        super().__init__(kind)
        self.kind: Literal["connect", "timeout"] = kind


class Signer(Protocol):
    """What a deployment's credentials add to one request (credentials.py): SigV4's headers
    for the bytes about to be sent, or the cached bearer token; cheap, on the event loop."""

    def headers(
        self, method: str, url: str, headers: dict[str, str], body: bytes
    ) -> dict[str, str]: ...


class Endpoint:
    """One deployment with everything per-request work needs, computed once: its kind's wire
    (``core/kinds``), the request heads' constant part per route, and its credentials."""

    __slots__ = (
        "_bedrock",
        "_dropped",
        "_dropped_count",
        "_error_of",
        "_host",
        "_prefixes",
        "_signed",
        "_signer",
        "dep",
        "events_type",
        "kind",
        "origin",
        "reply_headers",
        "wire",
    )

    def __init__(
        self,
        dep: DeploymentConfig,
        signer: Signer | None = None,
        dropped: DroppedLog | None = None,
    ) -> None:
        self.dep = dep
        self.wire = wire = kinds.wire(dep)
        self.kind = wire.kind
        # Config checked: http(s), a host, a valid port (core/kinds keeps only the origin).
        self.origin, self._host, _ = address(wire.origin)
        constant = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **wire.headers}
        key = dep.key()
        if wire.auth == "x-api-key" and key:
            constant["x-api-key"] = key
        elif wire.auth == "bearer" and key:
            constant["authorization"] = "Bearer " + key
        self._signer = signer if wire.auth in ("sigv4", "google") else None
        # What SigV4 signs of the head (host; the x-amz-* it adds itself): built once, not
        # per request, and the same dict each time, so RouteSigner's memo keys stay equal.
        self._signed = {"host": self._host}
        self._prefixes = {
            route_key: request_prefix(route.path, self._host, {**constant, **route.headers})
            for route_key, route in wire.routes.items()
        }
        # What a 2xx stream's content-type must be (core/timeouts.content_type_ok).
        self.events_type = kinds.events_type(wire)
        # Betas and fields already logged as dropped: bounded (core/dropped.py says why).
        # `is None`, not `or`: an empty log has len() 0, and the configured one would be replaced.
        self._dropped = dropped if dropped is not None else DroppedLog()
        self._dropped_count = {w: metrics.DROPPED.labels(dep.name, w) for w in ("beta", "field")}
        self._error_of: Any = vertex_error if self.kind == "vertex" else anthropic_error
        self._bedrock: Any = None
        if self.kind == "bedrock":
            # botocore's event-stream and error parsers: imported only for Bedrock deployments
            # (botocore costs ~10 MB a process that has none).
            from .core.kinds import bedrock_answers

            self._bedrock = bedrock_answers
            self._error_of = bedrock_answers.bedrock_error
        # Base of every reply's x-ezat-* headers; the router adds the affinity outcome.
        self.reply_headers = {"x-ezat-region": dep.routing_region, "x-ezat-deployment": dep.name}

    def request(
        self, req: RouteRequest, body: bytes, traceparent: str | None = None
    ) -> tuple[bytes, bytes]:
        """The request's head and body as this deployment's kind wants them (``core/kinds``).
        ``PayloadError`` for a body that is not a JSON object; ``ValueError`` if a client-given
        value cannot be a header. ``traceparent`` (the attempt's span, or the client's with
        tracing off) is sent on."""
        api: kinds.Api = "count_tokens" if req.api == "count_tokens" else "messages"
        shaped = kinds.shape(self.wire, api, req.stream, body, req.beta)
        if shaped.dropped_betas or shaped.dropped_fields:
            self._log_dropped(shaped)
        own = {"x-request-id": req.request_id}
        if traceparent:
            own["traceparent"] = traceparent
        beta = shaped.headers.get("anthropic-beta")
        if beta:
            own["anthropic-beta"] = beta
        if self._signer is not None:
            own.update(self._signer.headers("POST", shaped.url, self._signed, shaped.body))
        prefix = self._prefixes[kinds.route_key(api, req.stream)]
        return request_head(prefix, own, len(shaped.body)), shaped.body

    def stream_parser(self, max_frame: int) -> SseParser | EventStreamParser:
        """A parser of this deployment's stream into the Anthropic events ``core/stream.py``
        steps through: Server-Sent Events, or Bedrock's AWS event stream."""
        if self.events_type == kinds.bedrock.EVENT_STREAM:
            parser: EventStreamParser = self._bedrock.EventStreamParser(max_frame)
            return parser
        return SseParser(max_frame=max_frame)

    def count_answer(self, data: bytes) -> bytes:
        """A 2xx count_tokens body in the Anthropic API's shape (Bedrock's CountTokens answers
        ``{"inputTokens": N}``)."""
        if self.wire.wraps_count:
            answer: bytes = self._bedrock.count_tokens_answer(data)
            return answer
        return data

    def count_refused(self, status: int, headers: Mapping[str, str], body: bytes) -> bool:
        """Whether a non-2xx count_tokens answer says this deployment's model cannot count
        (Bedrock's CountTokens; ``core/counting``). Other kinds and wires count every model."""
        if self.wire.wraps_count:
            refused: bool = self._bedrock.count_refused(status, headers, body)
            return refused
        return False

    def error_answer(self, status: int, headers: Mapping[str, str], body: bytes) -> ErrorAnswer:
        """A non-2xx answer as the Anthropic API would give it: status, error body and
        ``retry-after`` (``core/upstream_errors.from_status`` reads those)."""
        answer: ErrorAnswer = self._error_of(status, headers, body)
        return answer

    def _log_dropped(self, shaped: kinds.Shaped) -> None:
        """Every refused beta or field is counted; the log names new ones, at a bounded rate
        and from a bounded memory (``core/dropped.py``): the values are the client's."""
        noted: list[str] = []
        for what, values in (("beta", shaped.dropped_betas), ("field", shaped.dropped_fields)):
            if values:
                self._dropped_count[what].inc(len(values))
                # Cut before repr: a value may be a whole header long; the log remembers KEY_CHARS.
                noted += [what + " " + repr(value[:KEY_CHARS]) for value in values]
        notice = self._dropped.note(tuple(noted), time.monotonic())
        if notice is not None:
            log.warning(
                "deployment %s (%s) does not accept %s: dropped from its requests"
                " (%d more new values not named)",
                self.dep.name,
                self.kind,
                ", ".join(notice.named),
                notice.suppressed,
            )


def pool(cfg: RouterConfig) -> Pool:
    """The connections every upstream call shares, under the router's connect timeout."""
    return Pool(cfg.connect_timeout, KEEPALIVE_SECONDS)


class Upstream:
    """Calls to the deployments over ``pool``; ``start`` sweeps its idle connections, ``close``
    closes them."""

    def __init__(self, cfg: RouterConfig, pool: Pool) -> None:
        self._cfg = cfg
        self._pool = pool
        self._sweeper: asyncio.Task[None] | None = None

    def use(self, cfg: RouterConfig) -> None:
        """A config reload: the router's per-request limits for the next requests."""
        self._cfg = cfg

    async def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep(self._pool))

    async def close(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        await stop_task(sweeper)
        self._pool.close()

    @staticmethod
    async def _sweep(pool: Pool) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            pool.sweep()

    async def open(
        self, endpoint: Endpoint, head: bytes, payload: bytes, timeout: float
    ) -> Response:
        """POST and wait up to ``timeout`` s for the response headers; the caller must release
        the response (``Response.release``: pooled if read to its end, else aborted, which is how
        the deployment learns at once that the client went away)."""
        try:
            async with asyncio.timeout(timeout):
                return await self._pool.request(endpoint.origin, head, payload)
        except UpstreamError:
            # No connection (refused, DNS, TLS, connect timeout), or it broke before the headers.
            raise UpstreamUnavailable("connect") from None
        except TimeoutError:
            raise UpstreamUnavailable("timeout") from None

    async def read_body(self, resp: Response) -> bytes:
        """The whole body, within ``between_events_timeout``; raises UpstreamError/TimeoutError."""
        async with asyncio.timeout(self._cfg.between_events_timeout):
            data: bytes = await resp.read()
            return data
