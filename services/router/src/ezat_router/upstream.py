"""HTTP client adapter for the deployments: one pooled keep-alive session per process.

Timeouts come from ``RouterConfig``: ``connect_timeout`` for the TCP/TLS connect,
``first_byte_timeout`` until the response headers, ``between_events_timeout`` for each read of
the body (applied by the caller around its reads, so a slow first token is not cut short by the
per-read limit and vice versa).
"""

from __future__ import annotations

import asyncio
from typing import Literal

import aiohttp
from ezat_common.config import DeploymentConfig, RouterConfig
from ezat_common.envelopes import RouteRequest

from .core.payload import model_prefix

ANTHROPIC_VERSION = "2023-06-01"
# Connections kept per process; well above what one router replica drives at once.
POOL_LIMIT = 1024
KEEPALIVE_SECONDS = 30.0


class UpstreamUnavailable(Exception):
    """No response headers: the deployment was unreachable (connect) or too slow (timeout)."""

    def __init__(self, kind: Literal["connect", "timeout"]) -> None:
        super().__init__(kind)
        self.kind: Literal["connect", "timeout"] = kind


class Target:
    """One deployment with everything per-request work needs, computed once."""

    __slots__ = ("count_url", "dep", "headers", "messages_url", "prefix", "reply_headers")

    def __init__(self, dep: DeploymentConfig) -> None:
        self.dep = dep
        base = dep.base_url.rstrip("/")
        self.messages_url = base + "/v1/messages"
        self.count_url = base + "/v1/messages/count_tokens"
        self.prefix = model_prefix(dep)
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        key = dep.key()
        if key:
            headers["x-api-key"] = key
        self.headers = headers
        # Base of every reply's x-ezat-* headers; the router adds the affinity outcome.
        self.reply_headers = {"x-ezat-region": dep.region, "x-ezat-deployment": dep.name}

    def request_headers(self, req: RouteRequest) -> dict[str, str]:
        headers = dict(self.headers)
        headers["x-request-id"] = req.request_id
        # anthropic-beta is passed on for create, never for count_tokens (SPEC §2).
        if req.beta and req.api != "count_tokens":
            headers["anthropic-beta"] = req.beta
        return headers


class Upstream:
    def __init__(self, cfg: RouterConfig) -> None:
        self._cfg = cfg
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(
            limit=POOL_LIMIT, keepalive_timeout=KEEPALIVE_SECONDS, ttl_dns_cache=300
        )
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._cfg.connect_timeout, sock_read=None
        )
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=timeout, raise_for_status=False
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def open(
        self, url: str, payload: bytes, headers: dict[str, str]
    ) -> aiohttp.ClientResponse:
        """POST and wait for the response headers; the caller must ``finish`` the response."""
        assert self._session is not None, "Upstream.start() was not called"
        try:
            async with asyncio.timeout(self._cfg.first_byte_timeout):
                return await self._session.post(url, data=payload, headers=headers)
        except aiohttp.ClientError:
            # Includes aiohttp's connect timeout and a connection dropped before the headers.
            raise UpstreamUnavailable("connect") from None
        except TimeoutError:
            raise UpstreamUnavailable("timeout") from None

    async def read_body(self, resp: aiohttp.ClientResponse) -> bytes:
        """The whole body, within ``between_events_timeout``; raises ClientError/TimeoutError."""
        async with asyncio.timeout(self._cfg.between_events_timeout):
            return await resp.read()


def finish(resp: aiohttp.ClientResponse) -> None:
    """Give the connection back to the pool when the body was read to the end, else close it
    (the deployment sees the disconnect at once and stops generating)."""
    if resp.content.at_eof():
        resp.release()
    else:
        resp.close()
