"""AWS credentials and SigV4 signing for ``bedrock`` deployments (docs/routing.md,
"Credentials").

The credentials come from botocore's standard chain (``Session(profile).get_credentials()``:
environment, the web-identity token file that EKS IRSA / Pod Identity set, the shared config and
credentials files, ``credential_process``, container and instance metadata). botocore's
``RefreshableCredentials`` refresh synchronously, with network I/O, inside
``get_frozen_credentials()``, so that call only ever runs in a worker thread (``Refresher``); the
request path signs with the cached frozen copy.

Signing is botocore's ``SigV4Auth`` (``RouteSigner``), memoised: what does not depend on the body
is computed by botocore's own methods once per route and second, the signing key once per day;
per request only the body's SHA-256 and two HMACs remain (docs/routing.md, "Credentials", why).
The signer is reused until the credentials change. No ``X-Amz-Content-SHA256`` is sent (boto3
sends none to bedrock-runtime; the body's SHA-256 is in the signature either way).
"""

from __future__ import annotations

import logging
import time
from hashlib import sha256
from typing import Any

import botocore.session
from botocore.auth import EMPTY_SHA256_HASH, SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials

from .refresh import DEFAULT_EVERY, DEFAULT_MARGIN, Fetched, Refresher, RefreshStats

# What botocore's chain looks at, in its order: said when it finds nothing.
CHAIN = (
    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, "
    "the profile in AWS_CONFIG_FILE (~/.aws/config) and AWS_SHARED_CREDENTIALS_FILE "
    "(~/.aws/credentials) including credential_process and SSO, container credentials "
    "(AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI), EC2 instance metadata"
)


class NoAwsCredentials(Exception):
    """botocore's chain found nothing."""


def _quiet_canonical_request_log() -> None:
    # SigV4Auth logs the canonical request at DEBUG, and it holds X-Amz-Security-Token.
    log = logging.getLogger("botocore.auth")
    if log.getEffectiveLevel() < logging.INFO:
        log.setLevel(logging.INFO)


class _Head:
    """What one route's signature shares within one second: the canonical request up to the
    payload hash, the ``Authorization`` value up to the signature, the headers botocore added
    (``X-Amz-Date``, ``X-Amz-Security-Token``) and the request whose context string_to_sign
    reads."""

    __slots__ = ("added", "authorization", "canonical", "request")

    def __init__(
        self, signer: RouteSigner, method: str, url: str, headers: dict[str, str], stamp: str
    ) -> None:
        request = AWSRequest(method=method, url=url, headers=headers, data=b"")
        request.context["timestamp"] = stamp
        signer._modify_request_before_signing(request)
        canonical: str = signer.canonical_request(request)
        # The canonical request ends with the payload's hash (here the empty body's): the one
        # line that differs between two requests of a route in the same second.
        if not canonical.endswith("\n" + EMPTY_SHA256_HASH):
            raise RuntimeError("botocore's canonical request no longer ends with the payload hash")
        signer._inject_signature_to_request(request, "")
        self.canonical = canonical[: -len(EMPTY_SHA256_HASH)]
        self.authorization: str = request.headers["Authorization"]
        self.added = {"x-amz-date": stamp}
        if signer.credentials.token:
            self.added["x-amz-security-token"] = signer.credentials.token
        self.request = request


class RouteSigner(SigV4Auth):  # type: ignore[misc]  # botocore ships no types
    """botocore's SigV4 for one (credentials, service, region), memoised.

    ``add_auth`` rebuilds everything per request: an ``email.message`` header map (twice), the
    URL split, the canonical headers, four HMACs for the signing key; ≈ 85 µs a request of
    which ≈ 3 µs depends on the body. Here botocore's own methods compute those once per (route,
    second) and the key once per day; each request adds the body's SHA-256, botocore's
    ``string_to_sign`` and the final HMAC. ``sign`` gives what ``add_auth`` would for the same
    moment (tests/router/test_sigv4_memo.py compares them)."""

    def __init__(self, credentials: ReadOnlyCredentials, service: str, region: str) -> None:
        super().__init__(credentials, service, region)
        self._second = -1
        self._stamp = ""
        self._heads: dict[tuple[str, str, tuple[tuple[str, str], ...]], _Head] = {}
        self._day = ""
        self._key = b""

    def _signing_key(self, day: str) -> bytes:
        # SigV4Auth.signature's derivation, kept for the day instead of redone per request.
        if day != self._day:
            k_date = self._sign(f"AWS4{self.credentials.secret_key}".encode(), day)
            k_region = self._sign(k_date, self._region_name)
            k_service = self._sign(k_region, self._service_name)
            self._key = self._sign(k_service, "aws4_request")
            self._day = day
        return self._key

    def sign(
        self, method: str, url: str, headers: dict[str, str], body: bytes, now: float
    ) -> dict[str, str]:
        """The ``authorization`` and ``x-amz-*`` headers for this request at time ``now``."""
        second = int(now)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime(SIGV4_TIMESTAMP, time.gmtime(second))
            self._heads.clear()
        key = (method, url, tuple(headers.items()))
        head = self._heads.get(key)
        if head is None:
            head = self._heads[key] = _Head(self, method, url, headers, self._stamp)
        canonical = head.canonical + sha256(body).hexdigest()
        signature = self._sign(
            self._signing_key(self._stamp[:8]),
            self.string_to_sign(head.request, canonical),
            hex=True,
        )
        return {"authorization": head.authorization + signature, **head.added}


class AwsSource:
    """One AWS identity (the default chain or a named profile), shared by every deployment that
    uses it: one refresh loop, and ``sign`` for each (service, region)."""

    def __init__(
        self,
        profile: str | None,
        *,
        margin: float = DEFAULT_MARGIN,
        every: float = DEFAULT_EVERY,
    ) -> None:
        self.profile = profile
        self.name = f"aws profile `{profile}`" if profile else "aws default chain"
        self._chain: Any = None  # botocore Credentials; touched only in the refresh thread
        self._refresher: Refresher[ReadOnlyCredentials] = Refresher(
            self.name, self._fetch, margin=margin, every=every
        )
        self._signed_with: ReadOnlyCredentials | None = None
        self._signers: dict[tuple[str, str], RouteSigner] = {}

    def looked_for(self) -> str:
        if self.profile:
            return (
                f"profile `{self.profile}` in AWS_CONFIG_FILE (~/.aws/config) and "
                "AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), with its role, "
                "web-identity, credential_process or SSO settings"
            )
        return CHAIN

    async def start(self) -> None:
        _quiet_canonical_request_log()
        await self._refresher.start()

    async def close(self) -> None:
        await self._refresher.close()

    def ready(self) -> bool:
        return self._refresher.ready()

    def stats(self) -> RefreshStats:
        return self._refresher.stats()

    def _fetch(self) -> Fetched[ReadOnlyCredentials]:
        """Blocking (a worker thread): resolve the chain once, then botocore refreshes it."""
        if self._chain is None:
            chain = botocore.session.Session(profile=self.profile).get_credentials()
            if chain is None:
                raise NoAwsCredentials("botocore's credential chain found no credentials")
            self._chain = chain
        frozen = self._chain.get_frozen_credentials()
        # RefreshableCredentials keep their expiry privately; static ones have none.
        expiry = getattr(self._chain, "_expiry_time", None)
        return Fetched(frozen, None if expiry is None else expiry.timestamp())

    def sign(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes,
        service: str,
        region: str,
    ) -> dict[str, str]:
        """The headers that authenticate this request (``authorization``, ``x-amz-date``,
        ``x-amz-security-token`` for temporary credentials). ``url`` and ``headers`` must be
        what is sent: every header given is signed (but botocore's unsigned ones, e.g.
        ``connection``), and ``host`` is taken from ``url`` unless given. Raises
        ``CredentialsUnavailable`` when the credentials have expired."""
        frozen = self._refresher.current()
        if frozen is not self._signed_with:
            self._signers.clear()
            self._signed_with = frozen
        signer = self._signers.get((service, region))
        if signer is None:
            signer = self._signers[(service, region)] = RouteSigner(frozen, service, region)
        return signer.sign(method, url, headers, body, time.time())
