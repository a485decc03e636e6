"""The operator's endpoints: liveness, readiness (NATS, the database, one replica of each
service answering its health probe) and Prometheus metrics (docs/reliability.md)."""

from __future__ import annotations

import asyncio

import msgspec
from aiohttp import web
from ezat_common import bus, envelopes, metrics
from ezat_common.subjects import Subjects
from ezat_common.undecodable import undecodable

from .auth import Authenticator
from .responses import JSON

PROBED_SERVICES = ("translator", "router", "billing", "fetcher")


class Operations:
    def __init__(self, nc: bus.Client, subjects: Subjects, auth: Authenticator) -> None:
        self.nc = nc
        self.subjects = subjects
        self.auth = auth  # its pool connects in the background (PostgreSQL may come up later)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        checks = await self.readiness()
        ready = all(v == "ok" for v in checks.values())
        body = msgspec.json.encode({"status": "ready" if ready else "not ready", "checks": checks})
        return web.Response(status=200 if ready else 503, body=body, content_type=JSON)

    async def readiness(self) -> dict[str, str]:
        checks: dict[str, str] = {}
        connected = self.nc.is_connected
        checks["nats"] = "ok" if connected else "not connected"
        checks["database"] = await self._db_check()
        if not connected:
            return checks
        results = await asyncio.gather(*(self._probe(svc) for svc in PROBED_SERVICES))
        checks.update(zip(PROBED_SERVICES, results, strict=True))
        return checks

    async def _db_check(self) -> str:
        if self.auth.pool is None:
            return "not connected"
        try:
            await asyncio.wait_for(self.auth.pool.fetchval("SELECT 1"), 1.0)
            return "ok"
        except Exception as exc:
            return f"unavailable ({type(exc).__name__})"

    async def _probe(self, service: str) -> str:
        try:
            msg = await self.nc.request(self.subjects.health(service), b"", timeout=1.0)
            reply = envelopes.decode_health(msg.data)
        except msgspec.DecodeError as exc:
            undecodable("health_reply", self.subjects.health(service), exc)
            return "unreadable health reply"
        except Exception:
            return "no replica answered"
        return "ok" if reply.ok else reply.detail

    async def metrics_endpoint(self, request: web.Request) -> web.Response:
        # OpenMetrics (with exemplars) when the scraper asks for it, as Prometheus does.
        data, content_type = metrics.exposition(request.headers.get("accept"))
        return web.Response(body=data, headers={"content-type": content_type})
