"""``GET /api/status``: the whole stack as this edge sees it, for operators only (docs/api.md,
"Operator status").

What ``/readyz`` answered before it became the edge's own: every replica of translator, router,
billing and fetcher answering its health probe (every replica answers, so they are counted), plus
NATS, PostgreSQL, Redis, this edge's own verdict and the router replicas' view of their
deployments. 200 when every service has a ready replica and the edge and PostgreSQL are fine, 503
otherwise, with the same body. The caller presents ``EZAT_OPERATOR_TOKEN`` as a bearer token; an
API key is not an operator credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import time
from collections import Counter
from typing import Any

import msgspec
from aiohttp import web
from ezat_common import bus, envelopes, environment, readiness
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects
from ezat_common.undecodable import undecodable
from nats.aio.msg import Msg
from redis import asyncio as aioredis

from .auth import presented_key
from .console_sessions import EndedSessions
from .core import console_session
from .operations import Operations
from .responses import JSON

SERVICES = ("translator", "router", "billing", "fetcher")
FIRST_REPLY = 1.0  # seconds a service's first replica gets to answer
MORE_REPLIES = 0.2  # then, how long the other replicas get
REDIS_TIMEOUT = 0.5


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


async def authorise(
    request: web.Request, token: bytes | None, sessions: EndedSessions | None
) -> None:
    """Let only the operator through (``token``: the digest of ``EZAT_OPERATOR_TOKEN``), or a
    console session that is valid, sends its CSRF header and was not signed out (``sessions``;
    None: no session is let through)."""
    if token is None:
        raise GatewayError(
            403, "operator endpoints are disabled: set EZAT_OPERATOR_TOKEN on the edge"
        )
    presented = presented_key(request)
    cookie = request.cookies.get(console_session.COOKIE)
    if presented is None and cookie is not None:  # the console's session (docs/console.md)
        key = console_session.session_key(token)
        csrf = request.headers.get(console_session.CSRF_HEADER)
        refused = console_session.verdict(key, cookie, csrf, time.time())
        if refused is None and (sessions is None or await sessions.ended(cookie)):
            refused = 401, console_session.ENDED
        if refused is None:
            return
        status, why = refused
        raise GatewayError(status, why, type="authentication_error" if status == 401 else None)
    if presented is None:
        raise GatewayError(
            401,
            "missing operator token: send it as Authorization: Bearer",
            type="authentication_error",
        )
    if not hmac.compare_digest(_digest(presented), token):
        raise GatewayError(403, "this endpoint is for operators: that is not the operator token")


class StackStatus:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        ops: Operations,
        redis: aioredis.Redis | None,
        token: str | None = None,
        *,
        sessions: EndedSessions | None = None,
    ) -> None:
        self.nc = nc
        self.sessions = sessions
        self.subjects = subjects
        self.ops = ops
        self.redis = redis
        token = token if token is not None else environment.operator_token()
        self._token = _digest(token) if token else None

    async def handle(self, request: web.Request) -> web.Response:
        await authorise(request, self._token, self.sessions)
        report = await self.report()
        status = 200 if report["status"] == "ok" else 503
        return web.Response(status=status, body=msgspec.json.encode(report), content_type=JSON)

    async def report(self) -> dict[str, Any]:
        connected = self.nc.is_connected
        probing = asyncio.gather(*(self.replicas(s) for s in SERVICES if connected))
        edge, database, redis = await asyncio.gather(
            self.ops.readiness.evaluate(), self.ops.database(), self.redis_state()
        )
        answers = dict(zip(SERVICES, await probing, strict=False))
        services = {s: _summary(answers.get(s, [])) for s in SERVICES}
        whole = (
            self.ops.readiness.ok(edge)
            and database == readiness.OK
            and all(s["ready"] > 0 for s in services.values())
        )
        return {
            "status": "ok" if whole else "degraded",
            "edge": {"ready": self.ops.readiness.ok(edge), "checks": edge},
            "nats": self.nats_state(),
            "postgresql": database,
            "redis": redis,
            "services": services,
            "deployments": _deployments(answers.get("router", [])),
        }

    def nats_state(self) -> dict[str, Any]:
        url = self.nc.connected_url  # its netloc may hold credentials: host and port only
        server = f"{url.hostname}:{url.port}" if url is not None and self.nc.is_connected else ""
        return {"connected": self.nc.is_connected, "server": server}

    async def redis_state(self) -> str:
        if self.redis is None:
            return "not configured"
        try:
            await asyncio.wait_for(self.redis.ping(), REDIS_TIMEOUT)
            return readiness.OK
        except Exception as exc:
            return f"unavailable ({type(exc).__name__})"

    async def replicas(self, service: str) -> list[envelopes.HealthReply]:
        """Every replica's answer to the service's health probe, collected briefly."""
        replies: list[envelopes.HealthReply] = []
        first = asyncio.Event()
        subject = self.subjects.health(service)

        async def on_reply(msg: Msg) -> None:
            first.set()
            if bus.is_no_responders(msg):
                return
            try:
                replies.append(envelopes.decode_health(msg.data))
            except msgspec.DecodeError as exc:
                undecodable("health_reply", subject, exc)

        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, cb=on_reply)
        try:
            await self.nc.publish(subject, b"", reply=inbox)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(first.wait(), FIRST_REPLY)
                await asyncio.sleep(MORE_REPLIES)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        return replies


def _summary(replies: list[envelopes.HealthReply]) -> dict[str, Any]:
    ready = sum(r.ok for r in replies)
    problems = sorted({r.detail for r in replies if not r.ok})
    return {"replicas": len(replies), "ready": ready, "problems": problems}


def _deployments(routers: list[envelopes.HealthReply]) -> dict[str, dict[str, int]]:
    """Per deployment, how many router replicas see it in each availability."""
    seen: dict[str, Counter[str]] = {}
    for reply in routers:
        for name, state in reply.states.items():
            seen.setdefault(name, Counter())[state] += 1
    return {name: dict(sorted(counts.items())) for name, counts in sorted(seen.items())}
