"""The console's session against the running edge (docs/console.md, "Sign-in"): the cookie is
accepted by the admin API only with its CSRF header, a wrong token is refused, and the traffic
series matches its documented schema."""

from __future__ import annotations

import aiohttp
import asyncpg
from yarl import URL

from .conftest import Gateway
from .test_openapi import check


async def test_session_cookie_needs_its_csrf_header(gateway: Gateway) -> None:
    jar = aiohttp.CookieJar(unsafe=True)  # the edge listens on an IP address
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        url = gateway.url
        async with http.post(url + "/console/session", json={"token": "nope"}) as r:
            assert r.status == 401
        async with http.get(url + "/console/session") as r:
            assert (await r.json()) == {"signed_in": False}
        token = gateway.stack.operator_token
        async with http.post(url + "/console/session", json={"token": token}) as r:
            assert r.status == 200
            csrf = (await r.json())["csrf"]
            cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert token not in cookie
        async with http.get(url + "/admin/v1/teams") as r:
            assert r.status == 403
            assert "x-ezat-csrf" in (await r.json())["error"]["message"]
        async with http.get(url + "/admin/v1/teams", headers={"x-ezat-csrf": csrf + "x"}) as r:
            assert r.status == 403
        headers = {"x-ezat-csrf": csrf}
        async with http.get(url + "/admin/v1/teams", headers=headers) as r:
            assert r.status == 200
        async with http.get(url + "/admin/v1/traffic?window=1d", headers=headers) as r:
            assert r.status == 200
            check("Traffic", await r.json())
        async with http.get(url + "/admin/v1/traffic?window=2h", headers=headers) as r:
            assert r.status == 400 and "window" in (await r.json())["error"]["message"]
        async with http.get(url + "/admin/v1/audit/verify", headers=headers) as r:
            check("AuditVerification", await r.json())
        async with http.delete(url + "/console/session", headers=headers) as r:
            assert r.status == 204
        async with http.get(url + "/admin/v1/teams", headers=headers) as r:
            assert r.status == 401


async def test_a_signed_out_session_is_refused_even_to_a_copy_of_its_cookie(
    gateway: Gateway,
) -> None:
    """Signing out ends the session on the server: the cookie and CSRF token someone copied
    before are refused afterwards (401), by the admin API, /api/status and the session endpoint,
    and the ending is in PostgreSQL, where every edge looks."""
    url = gateway.url
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        token = gateway.stack.operator_token
        async with http.post(url + "/console/session", json={"token": token}) as r:
            csrf = (await r.json())["csrf"]
        cookie = http.cookie_jar.filter_cookies(URL(url))["ezat_console"].value
        async with http.delete(url + "/console/session") as r:  # no CSRF header
            assert r.status == 403
            assert "x-ezat-csrf" in (await r.json())["error"]["message"]
        async with http.delete(url + "/console/session", headers={"x-ezat-csrf": csrf}) as r:
            assert r.status == 204
    copied = {"cookie": f"ezat_console={cookie}", "x-ezat-csrf": csrf}
    async with aiohttp.ClientSession() as thief:
        for path in ("/admin/v1/teams", "/admin/v1/requests", "/api/status"):
            async with thief.get(url + path, headers=copied) as r:
                assert r.status == 401, path
                assert "signed out" in (await r.json())["error"]["message"]
        async with thief.get(url + "/console/session", headers=copied) as r:
            assert (await r.json()) == {"signed_in": False}
    nonce = cookie.split(".")[2]
    conn = await asyncpg.connect(gateway.database_url)
    try:
        ended = await conn.fetchval(
            "SELECT expires_at FROM console_sessions_ended WHERE nonce = $1", nonce
        )
    finally:
        await conn.close()
    assert ended is not None and int(ended.timestamp()) == int(cookie.split(".")[1])
