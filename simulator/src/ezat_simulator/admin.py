"""The ``/_sim`` admin routes (no key; for tests): arm, show and clear a fault, list the last
requests, reset, stats (app.py's docstring lists them). Their errors have the Anthropic shape."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from .anthropic_wire import error_body, error_type
from .faults import decode_fault
from .instance import SIM
from .oauth import tokens_issued

JSON = "application/json"
_encode = msgspec.json.encode


def _admin_error(status: int, message: str) -> web.Response:
    return web.Response(
        status=status, body=error_body(error_type(status), message), content_type=JSON
    )


def _json(value: Any) -> web.Response:
    return web.Response(body=_encode(value), content_type=JSON)


async def arm_fault(request: web.Request) -> web.Response:
    sim = request.app[SIM]
    try:
        fault = decode_fault(await request.read())
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return _admin_error(400, f"fault: {exc}")
    problem = fault.problem()
    if problem is not None:
        return _admin_error(400, f"fault: {problem}")
    sim.faults.arm(fault)
    return _json(sim.faults.describe())


async def show_fault(request: web.Request) -> web.Response:
    return _json(request.app[SIM].faults.describe())


async def clear_fault(request: web.Request) -> web.Response:
    sim = request.app[SIM]
    sim.faults.clear()
    return _json(sim.faults.describe())


async def list_requests(request: web.Request) -> web.Response:
    try:
        limit = int(request.query.get("limit", "100"))
    except ValueError:
        return _admin_error(400, "limit: expects a whole number")
    return _json(request.app[SIM].log.last(limit))


async def reset(request: web.Request) -> web.Response:
    sim = request.app[SIM]
    sim.log.clear()
    sim.faults.clear()
    sim.cache.clear()
    return _json({"ok": True})


async def stats(request: web.Request) -> web.Response:
    sim = request.app[SIM]
    shown: dict[str, Any] = {
        "name": sim.settings.name,
        "requests": sim.log.total,
        "active": sim.log.active,
        "cache_entries": len(sim.cache),
    }
    issued = tokens_issued(request.app)
    if issued is not None:  # with a Vertex face: access tokens /token has issued
        shown["tokens_issued"] = issued
    return _json(shown)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/_sim/faults", arm_fault)
    app.router.add_get("/_sim/faults", show_fault)
    app.router.add_delete("/_sim/faults", clear_fault)
    app.router.add_get("/_sim/requests", list_requests)
    app.router.add_post("/_sim/reset", reset)
    app.router.add_get("/_sim/stats", stats)
