"""Google's OAuth 2 token endpoint as the Vertex face needs it: the JWT-bearer grant (RFC 7523)
that google-auth's service-account credentials perform, and the access tokens it issues
(simulator/README.md, "Vertex AI face").

``POST /token`` takes ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` and
``assertion=<RS256 JWT>`` (form-encoded). The assertion is verified with google-auth's own
``google.auth.jwt.decode`` against the public key of the configured service account named by its
``iss`` (the key id in its header picks the key), then its claims are checked as Google's endpoint
does: ``aud`` is Google's token URL (google-auth always puts ``https://oauth2.googleapis.com/token``
there, whatever ``token_uri`` it posts to) or the account file's ``token_uri``; ``iat``/``exp``
are current and at most an hour apart; ``scope`` is present. The answer is
``{"access_token", "expires_in", "token_type": "Bearer"}``; a refusal is Google's
``{"error": "invalid_grant", "error_description": ...}`` with 400, which google-auth raises as a
non-retryable ``RefreshError``.

Tokens are opaque and random; the issuer remembers each one with its expiry and scopes, so the
Vertex routes accept only a token it issued and that has not expired. The assertion is a
credential: it is never logged nor kept in the request log.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from google.auth import exceptions as google_exceptions
from google.auth import jwt

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
MAX_ASSERTION_SECONDS = 3600
CLOCK_SKEW_SECONDS = 60
# google-auth ships no type hints; its decode verifies the RS256 signature and iat/exp/aud.
_jwt_decode: Callable[..., Mapping[str, Any]] = jwt.decode
DEFAULT_TOKEN_LIFETIME = 3600.0
# Google's own wording for these refusals, so a client's logs read as they would in production.
BAD_SIGNATURE = "Invalid JWT Signature."
BAD_TIMES = (
    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
    "Check your iat and exp values in the JWT claim."
)


@dataclass(frozen=True, slots=True)
class ServiceAccount:
    """What Google holds of a service account: its email, and its public keys by key id."""

    email: str
    public_keys: Mapping[str, bytes]  # private_key_id -> PEM public key
    token_uri: str = GOOGLE_TOKEN_URL


def load_service_account(path: str | Path) -> ServiceAccount:
    """The public half of a service-account key file (the JSON google-auth reads).

    Only the public key derived from ``private_key`` is kept: the simulator verifies, never signs.
    """
    info = json.loads(Path(path).read_text())
    for key in ("client_email", "private_key_id", "private_key"):
        if not isinstance(info.get(key), str) or not info[key]:
            raise ValueError(f"{path}: a service-account key file needs `{key}`")
    private = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return ServiceAccount(
        info["client_email"],
        {info["private_key_id"]: public},
        str(info.get("token_uri") or GOOGLE_TOKEN_URL),
    )


class GrantRefused(Exception):
    """A 400 from the token endpoint, in OAuth's ``error`` / ``error_description`` form."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description

    def body(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}


@dataclass(frozen=True, slots=True)
class Grant:
    """One issued access token."""

    token: str
    expires_at: float
    scopes: frozenset[str]
    email: str


@dataclass(slots=True)
class TokenIssuer:
    """The service accounts it trusts, the tokens it issued, and how long they live."""

    accounts: tuple[ServiceAccount, ...] = ()
    lifetime: float = DEFAULT_TOKEN_LIFETIME
    issued: int = 0
    _live: dict[str, Grant] = field(default_factory=dict)

    def grant(self, form: Mapping[str, str], now: float) -> Grant:
        """A new token for a valid JWT-bearer ``form``; ``GrantRefused`` otherwise."""
        grant_type = form.get("grant_type", "")
        if grant_type != JWT_BEARER:
            raise GrantRefused("unsupported_grant_type", f"Invalid grant_type: {grant_type}")
        assertion = form.get("assertion", "")
        if not assertion:
            raise GrantRefused("invalid_request", "Missing required parameter: assertion")
        claims = self._verified_claims(assertion)
        scope = claims.get("scope")
        if not isinstance(scope, str) or not scope.strip():
            raise GrantRefused(
                "invalid_scope", "Invalid OAuth scope or ID token audience provided."
            )
        self._forget_expired(now)
        token = "ya29.sim_" + secrets.token_urlsafe(32)
        grant = Grant(token, now + self.lifetime, frozenset(scope.split()), str(claims["iss"]))
        self._live[token] = grant
        self.issued += 1
        return grant

    def lookup(self, token: str, now: float) -> Grant | None:
        """The grant of a token this issuer issued and that is still valid at ``now``."""
        grant = self._live.get(token)
        if grant is None or grant.expires_at <= now:
            return None
        return grant

    def expires_in(self) -> int:
        """``expires_in`` as sent: whole seconds, at least 1 (google-auth adds it to its clock)."""
        return max(1, round(self.lifetime))

    def _account(self, email: Any) -> ServiceAccount:
        for account in self.accounts:
            if account.email == email:
                return account
        raise GrantRefused("invalid_grant", "Invalid grant: account not found")

    def _verified_claims(self, assertion: str) -> Mapping[str, Any]:
        try:
            unverified = _jwt_decode(assertion, verify=False)
        except (ValueError, google_exceptions.GoogleAuthError) as exc:
            raise GrantRefused("invalid_grant", "Invalid JWT: malformed assertion") from exc
        account = self._account(unverified.get("iss"))
        audiences = sorted({GOOGLE_TOKEN_URL, account.token_uri})
        try:
            claims = _jwt_decode(
                assertion,
                certs=dict(account.public_keys),
                audience=audiences,
                clock_skew_in_seconds=CLOCK_SKEW_SECONDS,
            )
        except (ValueError, google_exceptions.GoogleAuthError) as exc:
            raise GrantRefused("invalid_grant", _refusal(str(exc))) from exc
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int | float) or not isinstance(exp, int | float):
            raise GrantRefused("invalid_grant", BAD_TIMES)
        if exp - iat > MAX_ASSERTION_SECONDS:
            raise GrantRefused("invalid_grant", BAD_TIMES)
        return claims

    def _forget_expired(self, now: float) -> None:
        for token in [t for t, g in self._live.items() if g.expires_at <= now]:
            del self._live[token]


def _refusal(problem: str) -> str:
    """Google's description for what google-auth's ``jwt.decode`` found wrong."""
    lowered = problem.lower()
    if "audience" in lowered:
        return "Invalid JWT: Failed audience check."
    if "expired" in lowered or "too early" in lowered or "claim" in lowered:
        return BAD_TIMES
    return BAD_SIGNATURE


ISSUER = web.AppKey("token_issuer", TokenIssuer)


def tokens_issued(app: web.Application) -> int | None:
    """How many access tokens ``/token`` issued (None when no Vertex face), for /_sim/stats."""
    issuer = app.get(ISSUER)
    return None if issuer is None else issuer.issued


async def token(request: web.Request) -> web.Response:
    """``POST /token``: the JWT-bearer grant. Not in the request log: the assertion is a
    credential."""
    issuer = request.app[ISSUER]
    form = await request.post()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    try:
        grant = issuer.grant(fields, time.time())
    except GrantRefused as exc:
        return web.json_response(exc.body(), status=400)
    answer = {
        "access_token": grant.token,
        "expires_in": issuer.expires_in(),
        "token_type": "Bearer",
    }
    return web.Response(
        body=msgspec.json.encode(answer),
        content_type="application/json",
        headers={"cache-control": "no-store"},
    )
