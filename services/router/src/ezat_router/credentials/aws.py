"""AWS credentials and SigV4 signing for ``bedrock`` deployments (docs/routing.md,
"Credentials").

The credentials come from botocore's standard chain (``Session(profile).get_credentials()``:
environment, the web-identity token file that EKS IRSA / Pod Identity set, the shared config and
credentials files, ``credential_process``, container and instance metadata). botocore's
``RefreshableCredentials`` refresh synchronously, with network I/O, inside
``get_frozen_credentials()``, so that call only ever runs in a worker thread (``Refresher``); the
request path signs with the cached frozen copy.

Signing is botocore's ``SigV4Auth.add_auth`` on an ``AWSRequest`` built from exactly what will be
sent (method, URL as on the wire, the headers to sign, the body); the signer object is reused
until the credentials change. No ``X-Amz-Content-SHA256`` is sent (boto3 sends none to
bedrock-runtime; the body's SHA-256 is in the signature either way).
"""

from __future__ import annotations

import logging
from typing import Any

import botocore.session
from botocore.auth import SigV4Auth
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
        self._signers: dict[tuple[str, str], SigV4Auth] = {}

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
            signer = self._signers[(service, region)] = SigV4Auth(frozen, service, region)
        request = AWSRequest(method=method, url=url, headers=headers, data=body)
        signer.add_auth(request)
        added = {
            "authorization": request.headers["Authorization"],
            "x-amz-date": request.headers["X-Amz-Date"],
        }
        if frozen.token:
            added["x-amz-security-token"] = frozen.token
        return added
