"""The deployments as the router calls them: each one's address and request head, computed once
(``Endpoint``), and the pooled client (``ezat_http1``) under the router's timeouts (``Upstream``).

Timeouts come from ``RouterConfig`` (``core/timeouts.py``): ``connect_timeout`` for the TCP/TLS
connect; until the response headers, the bound the caller passes (``first_byte_timeout`` for a
non-streamed answer, ``stream_first_byte_timeout`` for a stream or count_tokens);
``between_events_timeout`` for each read of the body (applied by the caller around its reads).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from ezat_common.config import DeploymentConfig, RouterConfig
from ezat_common.envelopes import RouteRequest
from ezat_http1 import Pool, Response, UpstreamError, address, request_head, request_prefix

from .core.payload import model_prefix

ANTHROPIC_VERSION = "2023-06-01"
USER_AGENT = "ezat-router"
KEEPALIVE_SECONDS = 30.0
SWEEP_SECONDS = 10.0  # how often idle connections past their keep-alive are closed


class UpstreamUnavailable(Exception):
    """No response headers: the deployment was unreachable (connect) or too slow (timeout)."""

    def __init__(self, kind: Literal["connect", "timeout"]) -> None:
        super().__init__(kind)
        self.kind: Literal["connect", "timeout"] = kind


class Endpoint:
    """One deployment with everything per-request work needs, computed once."""

    __slots__ = (
        "body_prefix",
        "count_prefix",
        "dep",
        "kind",
        "messages_prefix",
        "origin",
        "reply_headers",
    )

    def __init__(self, dep: DeploymentConfig) -> None:
        self.dep = dep
        # The API the deployment speaks (a metric label): the only one until DeploymentConfig
        # has a kind (docs/development.md, "How to add a deployment kind").
        self.kind = "anthropic"
        # Config checked: http(s), a host, a valid port, no query.
        self.origin, host, base = address(dep.base_url.rstrip("/"))
        headers = {
            "User-Agent": USER_AGENT,
            "Accept-Encoding": "identity",
            "content-type": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        key = dep.key()
        if key:
            headers["x-api-key"] = key
        self.messages_prefix = request_prefix(base + "/v1/messages", host, headers)
        self.count_prefix = request_prefix(base + "/v1/messages/count_tokens", host, headers)
        self.body_prefix = model_prefix(dep)  # the JSON body's start, with the upstream model
        # Base of every reply's x-ezat-* headers; the router adds the affinity outcome.
        self.reply_headers = {"x-ezat-region": dep.region, "x-ezat-deployment": dep.name}

    def request_head(self, req: RouteRequest, length: int, traceparent: str | None = None) -> bytes:
        """The request's head; ``ValueError`` if a client-given value cannot be a header.
        ``traceparent`` (the attempt's span, or the client's with tracing off) is sent on."""
        own = {"x-request-id": req.request_id}
        if traceparent:
            own["traceparent"] = traceparent
        # anthropic-beta is passed on for create, never for count_tokens (docs/api.md, "Messages
        # API").
        if req.api == "count_tokens":
            return request_head(self.count_prefix, own, length)
        if req.beta:
            own["anthropic-beta"] = req.beta
        return request_head(self.messages_prefix, own, length)


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

    async def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep(self._pool))

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
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
            return await resp.read()
