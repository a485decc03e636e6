"""Google OAuth 2 access tokens for ``vertex`` deployments (docs/routing.md, "Credentials").

Application Default Credentials (``google.auth.default``: the GOOGLE_APPLICATION_CREDENTIALS
key file, gcloud's user credentials, GKE workload identity and GCE through the metadata server),
or an explicit service-account key file (``google_key_file``), scoped to cloud-platform.
google-auth refreshes with blocking HTTP (``google.auth.transport.requests``), so the refresh
runs in a worker thread (``Refresher``) ahead of expiry; the request path reads the cached
``Bearer <token>`` value. google-auth's own "expired" test (a few minutes' skew) is not used:
the schedule is ``Refresher``'s, which also works for the simulator's few-second tokens.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

import google.auth
import requests
from google.auth.transport.requests import Request
from google.oauth2 import service_account

from .refresh import DEFAULT_EVERY, DEFAULT_MARGIN, Fetched, Refresher, RefreshStats

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
ADC = (
    "GOOGLE_APPLICATION_CREDENTIALS, gcloud's application_default_credentials.json, "
    "the metadata server (GKE workload identity, GCE)"
)


class GoogleSource:
    """One Google identity (ADC or a key file), shared by every deployment that uses it."""

    def __init__(
        self,
        key_file: str | None,
        *,
        margin: float = DEFAULT_MARGIN,
        every: float = DEFAULT_EVERY,
    ) -> None:
        self.key_file = key_file
        self.name = f"google key file {key_file}" if key_file else "google default credentials"
        self._creds: Any = None  # google-auth Credentials; touched only in the refresh thread
        self._session = requests.Session()
        self._request = Request(session=self._session)
        self._refresher: Refresher[str] = Refresher(
            self.name, self._fetch, margin=margin, every=every
        )

    def looked_for(self) -> str:
        return f"the service-account key file {self.key_file}" if self.key_file else ADC

    async def start(self) -> None:
        await self._refresher.start()

    async def close(self) -> None:
        await self._refresher.close()
        self._session.close()

    def ready(self) -> bool:
        return self._refresher.ready()

    def stats(self) -> RefreshStats:
        return self._refresher.stats()

    def authorization(self) -> str:
        """``Bearer <token>``; raises ``CredentialsUnavailable`` once the token has expired."""
        return self._refresher.current()

    def _fetch(self) -> Fetched[str]:
        """Blocking (a worker thread): load the credentials once, then a new token each time."""
        if self._creds is None:
            if self.key_file:
                # A service-account key only: the generic loader would also take external
                # account configurations (which run commands or fetch URLs) from the file.
                creds = service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                    self.key_file, scopes=[CLOUD_PLATFORM]
                )
            else:
                creds, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
            self._creds = creds
        self._creds.refresh(self._request)
        expiry = self._creds.expiry  # naive UTC, google-auth's convention; None: unknown
        expires_at = None if expiry is None else expiry.replace(tzinfo=UTC).timestamp()
        return Fetched(f"Bearer {self._creds.token}", expires_at)
