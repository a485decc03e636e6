"""``/console``: the operators' web console (docs/console.md).

Static files only, from this package's ``console/`` folder, read once at start: plain HTML, ES
modules, CSS and the vendored chart library. Every page and call of the console goes through the
admin API (admin.py) and ``/api/status``; this module adds only the sign-in that exchanges the
operator token for a session cookie (core/console_session.py) and the answers' headers: a
Content-Security-Policy that lets the page load nothing from anywhere but the edge.
"""

from __future__ import annotations

import hashlib
import hmac
import mimetypes
import re
import time
from importlib import resources

import msgspec
from aiohttp import web
from ezat_common import environment
from ezat_common.errors import GatewayError, invalid

from .console_sessions import EndedSessions
from .core import console_session as session
from .responses import JSON

ASSETS = "console"  # the package folder of the files
INDEX = "index.html"
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,80}")
SIGN_IN_MAX = 4096  # bytes of a sign-in body
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self';"
    " frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".md": "text/plain"}


def load_assets() -> dict[str, tuple[bytes, str, str]]:
    """name -> (bytes, content type, ETag) of every file the console serves."""
    out: dict[str, tuple[bytes, str, str]] = {}
    for item in resources.files("ezat_edge").joinpath(ASSETS).iterdir():
        if not item.is_file() or not _NAME.fullmatch(item.name):
            continue
        data = item.read_bytes()
        suffix = "." + item.name.rpartition(".")[2]
        kind = TYPES.get(suffix) or mimetypes.guess_type(item.name)[0] or "application/octet-stream"
        out[item.name] = (data, kind, '"' + hashlib.sha256(data).hexdigest()[:32] + '"')
    return out


class Console:
    def __init__(self, sessions: EndedSessions | None, token: str | None = None) -> None:
        self.sessions = sessions  # None: signing out cannot end a session, so none is issued
        token = token if token is not None else environment.operator_token()
        digest = hashlib.sha256(token.encode()).digest() if token else None
        self._digest = digest
        self._key = session.session_key(digest) if digest else None
        self.assets = load_assets()

    def _asset(self, request: web.Request, name: str) -> web.Response:
        found = self.assets.get(name)
        if found is None:
            raise GatewayError(404, f"GET {request.path}: no such console file")
        data, kind, etag = found
        headers = {**HEADERS, "etag": etag}
        if request.headers.get("if-none-match") == etag:
            return web.Response(status=304, headers=headers)
        return web.Response(body=data, content_type=kind, headers=headers)

    async def index(self, request: web.Request) -> web.Response:
        return self._asset(request, INDEX)

    async def asset(self, request: web.Request) -> web.Response:
        return self._asset(request, request.match_info["name"])

    # ---- the session -----------------------------------------------------------------------

    def _cookie(self, request: web.Request, response: web.Response, value: str, age: int) -> None:
        forwarded = request.headers.get("x-forwarded-proto", "").lower() == "https"
        response.set_cookie(
            session.COOKIE,
            value,
            max_age=age,
            path="/",
            httponly=True,
            samesite="Strict",
            secure=request.secure or forwarded,
        )

    async def sign_in(self, request: web.Request) -> web.Response:
        """``{"token": operator token}`` -> the session cookie and ``{"csrf", "expires_at"}``."""
        if self._key is None or self._digest is None or self.sessions is None:
            raise GatewayError(
                403, "operator endpoints are disabled: set EZAT_OPERATOR_TOKEN on the edge"
            )
        raw = await request.content.read(SIGN_IN_MAX + 1)
        try:
            token = msgspec.json.decode(raw, type=dict[str, str]).get("token") or ""
        except msgspec.DecodeError:
            raise invalid("token", 'send {"token": "<operator token>"} as JSON') from None
        presented = hashlib.sha256(token.encode()).digest()
        if not hmac.compare_digest(presented, self._digest):
            raise GatewayError(
                401,
                "that is not the operator token (EZAT_OPERATOR_TOKEN)",
                type="authentication_error",
            )
        cookie, csrf, expires = session.issue(self._key, time.time())
        response = _answer({"csrf": csrf, "expires_at": expires})
        self._cookie(request, response, cookie, session.LIFETIME)
        return response

    async def current(self, request: web.Request) -> web.Response:
        """The CSRF token of the session the cookie carries (a reloaded page keeps its session),
        or ``signed_in: false`` (none, expired, forged or signed out)."""
        cookie = request.cookies.get(session.COOKIE)
        if self._key is None or not session.valid_cookie(self._key, cookie, time.time()):
            return _answer({"signed_in": False})
        assert cookie is not None
        if self.sessions is None or await self.sessions.ended(cookie):
            return _answer({"signed_in": False})
        return _answer({"signed_in": True, "csrf": session.csrf_of(self._key, cookie)})

    async def sign_out(self, request: web.Request) -> web.Response:
        """End the session on every edge (a copy of its cookie is refused from now on) and clear
        the cookie. A live session must send its CSRF header (403 without); a cookie that is no
        session any more is only cleared."""
        cookie = request.cookies.get(session.COOKIE)
        if self._key is not None and cookie is not None and self.sessions is not None:
            csrf = request.headers.get(session.CSRF_HEADER)
            refused = session.verdict(self._key, cookie, csrf, time.time())
            if refused is not None and refused[0] == 403:
                raise GatewayError(*refused)
            if refused is None:
                await self.sessions.end(cookie)
        response = web.Response(status=204, headers=HEADERS)
        self._cookie(request, response, "", 0)
        return response


def _answer(value: object) -> web.Response:
    return web.Response(body=msgspec.json.encode(value), content_type=JSON, headers=HEADERS)


# The session's routes before the files': aiohttp matches in this order.
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("POST", "/console/session", "sign_in"),
    ("GET", "/console/session", "current"),
    ("DELETE", "/console/session", "sign_out"),
    ("GET", "/console", "index"),
    ("GET", "/console/{name}", "asset"),
)
