"""The console's session (docs/console.md, "Sign-in"): what ``POST /console/session`` hands
out for the operator token, and the check the admin API makes of it.

Stateless, so that every edge replica accepts a session another one issued: the cookie is
``v1.<expiry>.<nonce>.<mac>``, the MAC an HMAC-SHA256 keyed by a key derived from the
operator token's digest (changing ``EZAT_OPERATOR_TOKEN`` ends every session). The CSRF token is
another HMAC of the cookie's value: the console keeps it in memory and sends it as
``x-ezat-csrf`` with every admin call; a cross-site page can neither read it nor send the
cookie (``SameSite=Strict``).

Signing out ends the session on the server too: its nonce is stored as ended (in PostgreSQL,
until the session's expiry: console_sessions.py), and every edge refuses a cookie whose nonce is
there, CSRF header or not.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

COOKIE = "ezat_console"
CSRF_HEADER = "x-ezat-csrf"
LIFETIME = 12 * 3600  # seconds a session lasts
ENDED = "the console session was signed out: sign in again"
_VERSION = "v1"


def session_key(token_digest: bytes) -> bytes:
    """The MAC key of sessions, from the digest of the operator token."""
    return hmac.new(token_digest, b"ezat-console-session", hashlib.sha256).digest()


def _mac(key: bytes, message: str) -> str:
    raw = hmac.new(key, message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def issue(key: bytes, now: float, lifetime: int = LIFETIME) -> tuple[str, str, int]:
    """A new session: the cookie's value, its CSRF token and its expiry (Unix seconds)."""
    expires = int(now) + lifetime
    body = f"{_VERSION}.{expires}.{secrets.token_urlsafe(12)}"
    cookie = f"{body}.{_mac(key, body)}"
    return cookie, csrf_of(key, cookie), expires


def csrf_of(key: bytes, cookie: str) -> str:
    return _mac(key, "csrf:" + cookie)


def valid_cookie(key: bytes, cookie: str | None, now: float) -> bool:
    """A cookie this key issued and not yet expired."""
    if not cookie or len(cookie) > 200 or not cookie.isascii():  # compare_digest wants ASCII
        return False
    body, _, mac = cookie.rpartition(".")
    version, _, rest = body.partition(".")
    expiry, _, _nonce = rest.partition(".")
    if version != _VERSION or not expiry.isdigit():
        return False
    return hmac.compare_digest(mac, _mac(key, body)) and now < int(expiry)


def nonce_and_expiry(cookie: str) -> tuple[str, int]:
    """The nonce and expiry (Unix seconds) of a cookie ``valid_cookie`` accepted."""
    body = cookie.rpartition(".")[0]
    _version, expiry, nonce = body.split(".", 2)
    return nonce, int(expiry)


def verdict(key: bytes, cookie: str, csrf: str | None, now: float) -> tuple[int, str] | None:
    """The status and reason a request presenting the session ``cookie`` is refused with;
    None when it may pass."""
    if not valid_cookie(key, cookie, now):
        return 401, "the console session is invalid or expired: sign in again"
    if not csrf or not csrf.isascii() or not hmac.compare_digest(csrf, csrf_of(key, cookie)):
        return 403, f"a console session's calls must send its {CSRF_HEADER} header"
    return None
