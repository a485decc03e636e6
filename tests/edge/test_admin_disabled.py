"""The admin API of an edge without EZAT_OPERATOR_TOKEN: every call is 403 saying to set it,
before anything is read or written (ezat_edge/admin.py, status.authorise)."""

from __future__ import annotations

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from ezat_common.subjects import Subjects
from ezat_edge import admin as admin_api
from ezat_edge.auth import Authenticator
from ezat_edge.middleware import errors_mw
from support.config import SONNET, catalogue, model


async def test_an_edge_without_operator_token_refuses_every_admin_call() -> None:
    admin = admin_api.Admin(
        None,  # type: ignore[arg-type]  # never reached: the token check comes first
        Subjects(prefix="t"),
        catalogue(model(SONNET)),
        Authenticator(1.0),
        token="",
    )
    app = web.Application(middlewares=[errors_mw])
    app.add_routes([web.route(m, p, getattr(admin, n)) for m, p, n in admin_api.ROUTES])
    async with TestServer(app) as server, aiohttp.ClientSession() as http:
        for method, path, _ in admin_api.ROUTES:
            url = server.make_url(path.replace("{team_id}", "team_x").replace("{key_id}", "key_x"))
            async with http.request(
                method, url, json={"name": "x"}, headers={"authorization": "Bearer anything"}
            ) as r:
                answer = await r.json()
            assert r.status == 403, (method, path)
            assert answer["error"]["type"] == "permission_error"
            assert "set EZAT_OPERATOR_TOKEN" in answer["error"]["message"]
