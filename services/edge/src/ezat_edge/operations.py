"""The operator's endpoints: liveness, this edge's own readiness and Prometheus metrics
(docs/reliability.md, "Readiness"); the whole stack's view is status.py's ``/api/status``.

The edge is ready while NATS is connected, keys can be checked (PostgreSQL answers, or the key
cache holds keys it serves through an outage) and it is not draining. Other services are not
its business: one missing replica elsewhere must not take every edge out of its Service.
"""

from __future__ import annotations

from aiohttp import web
from ezat_common import bus, metrics, readiness

from .auth import Authenticator
from .responses import JSON

NO_KEYS = "PostgreSQL unreachable and no key cached"
DB_CHECK_TIMEOUT = 1.0  # seconds: the readiness probe's database check


class Operations:
    def __init__(self, nc: bus.Client, auth: Authenticator) -> None:
        self.nc = nc
        self.auth = auth  # its pool connects in the background (PostgreSQL may come up later)
        # "database" is reported; what counts is whether keys can be checked ("auth").
        self.readiness = readiness.Readiness("edge", optional=("database",))
        self.readiness.use(self.checks)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        status, body = self.readiness.body(await self.readiness.evaluate())
        return web.Response(status=status, body=body, content_type=JSON)

    async def checks(self) -> dict[str, str]:
        database = await self.database()
        usable = database == readiness.OK or self.auth.knows_keys()
        return {
            "nats": readiness.OK if self.nc.is_connected else "not connected",
            "database": database,
            "auth": readiness.OK if usable else NO_KEYS,
        }

    async def database(self) -> str:
        if self.auth.pool is None:
            return "not connected"
        try:
            # asyncpg's own timeouts, never a cancellation from outside: a cancelled query's
            # connection is released under a shield that waits for the server, forever when
            # the server is frozen (auth._find says why).
            async with self.auth.pool.acquire(timeout=DB_CHECK_TIMEOUT) as conn:
                await conn.fetchval("SELECT 1", timeout=DB_CHECK_TIMEOUT)
            return readiness.OK
        except Exception as exc:
            return f"unavailable ({type(exc).__name__})"

    async def metrics_endpoint(self, request: web.Request) -> web.Response:
        # OpenMetrics (with exemplars) when the scraper asks for it, as Prometheus does.
        data, content_type = metrics.exposition(request.headers.get("accept"))
        return web.Response(body=data, headers={"content-type": content_type})
