"""Each deployment's ``Credentials`` by the scheme its ``Wire.auth`` names, and ``Providers``,
which makes them and shares one source (and its one refresh loop) between deployments that name
the same AWS profile or Google key file. The package's docstring (``credentials/__init__.py``)
describes the schemes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from ezat_common.config import ConfigError, DeploymentConfig

from ..core.kinds.shaping import Wire
from .refresh import (
    DEFAULT_EVERY,
    DEFAULT_MARGIN,
    CredentialsUnavailable,
    RefreshStats,
    error_text,
)

if TYPE_CHECKING:
    # botocore and google-auth cost the router ~10 MB and 0.3 s at start: imported only when a
    # deployment signs with them (``Providers.credentials_for``).
    from .aws import AwsSource
    from .google import GoogleSource


class NoCredentials(ConfigError):
    """A deployment's credentials cannot be had at start: names the deployments and what was
    looked for, never a secret."""


class Credentials(Protocol):
    """A deployment's upstream authentication."""

    async def start(self) -> None:
        """Fetch the credentials (raises ``NoCredentials``) and start refreshing them."""

    async def close(self) -> None: ...

    def ready(self) -> bool:
        """Whether ``headers`` can authenticate a request now (started, not expired)."""

    def headers(
        self, method: str, url: str, headers: dict[str, str], body: bytes
    ) -> dict[str, str]:
        """The headers to add (lower-case names) to the request as it is sent: ``url`` and
        ``headers`` exactly as on the wire (SigV4 signs them). Raises
        ``CredentialsUnavailable`` when the credentials have expired."""

    def stats(self) -> RefreshStats | None:
        """The shared source's refresh counters (None for a static key)."""


class StaticKey:
    """A key from the configuration, sent in one header; ``prefix`` goes before it."""

    def __init__(self, dep: DeploymentConfig, header: str, prefix: str = "") -> None:
        self._dep = dep
        self._header = header
        self._prefix = prefix
        self._value: dict[str, str] | None = None

    async def start(self) -> None:
        key = self._dep.key()
        if key:
            self._value = {self._header: self._prefix + key}
        elif self._header == "x-api-key":
            self._value = {}  # an Anthropic-compatible upstream without a key (local, tests)
        else:
            env = self._dep.api_key_env
            where = (
                f"api_key_env: the variable {env} is unset or empty" if env else "api_key: empty"
            )
            raise NoCredentials(f"deployment `{self._dep.name}`: no Bedrock API key ({where})")

    async def close(self) -> None:
        return None

    def ready(self) -> bool:
        return self._value is not None

    def headers(
        self, method: str, url: str, headers: dict[str, str], body: bytes
    ) -> dict[str, str]:
        if self._value is None:
            raise CredentialsUnavailable(f"deployment `{self._dep.name}`: not started")
        return dict(self._value)

    def stats(self) -> RefreshStats | None:
        return None


class _Source(Protocol):
    """What ``AwsSource`` and ``GoogleSource`` share."""

    name: str

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    def ready(self) -> bool: ...
    def stats(self) -> RefreshStats: ...
    def looked_for(self) -> str: ...


S = TypeVar("S", bound=_Source)


class _Shared(Generic[S]):
    """A source and its users: started by the first user's start, closed by the last's close."""

    def __init__(self, source: S) -> None:
        self.source = source
        self.deployments: list[str] = []
        self._users = 0
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            if self._users == 0:
                try:
                    await self.source.start()
                except Exception as exc:
                    names = ", ".join(f"`{n}`" for n in self.deployments)
                    which = "deployment" if len(self.deployments) == 1 else "deployments"
                    raise NoCredentials(
                        f"{which} {names}: no {self.source.name} credentials "
                        f"({error_text(exc)}); looked for {self.source.looked_for()}"
                    ) from None
            self._users += 1

    async def release(self) -> None:
        async with self._lock:
            self._users -= 1
            if self._users == 0:
                await self.source.close()


class _SharedUser(Generic[S]):
    """One deployment's handle on a shared source."""

    def __init__(self, shared: _Shared[S]) -> None:
        self._shared = shared
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self._shared.acquire()
            self._started = True

    async def close(self) -> None:
        if self._started:
            self._started = False
            await self._shared.release()

    def ready(self) -> bool:
        return self._started and self._shared.source.ready()

    def stats(self) -> RefreshStats | None:
        return self._shared.source.stats()


class SigV4(_SharedUser["AwsSource"]):
    """Signs ``host`` and the ``x-amz-*`` headers, all SigV4 requires (TLS protects the others):
    fewer headers, fewer distinct routes for ``RouteSigner``'s memo."""

    def __init__(self, shared: _Shared[AwsSource], service: str, region: str) -> None:
        super().__init__(shared)
        self._source = shared.source
        self._service = service
        self._region = region

    def headers(
        self, method: str, url: str, headers: dict[str, str], body: bytes
    ) -> dict[str, str]:
        signed = {
            k: v for k, v in headers.items() if k.lower() == "host" or k[:6].lower() == "x-amz-"
        }
        return self._source.sign(method, url, signed, body, self._service, self._region)


class GoogleToken(_SharedUser["GoogleSource"]):
    def __init__(self, shared: _Shared[GoogleSource]) -> None:
        super().__init__(shared)
        self._source = shared.source

    def headers(
        self, method: str, url: str, headers: dict[str, str], body: bytes
    ) -> dict[str, str]:
        return {"authorization": self._source.authorization()}


class Providers:
    """Every deployment's ``Credentials``, sharing one source per AWS profile / Google key file.
    ``margin`` and ``every`` tune the refresh schedule (``refresh.next_refresh``)."""

    def __init__(self, *, margin: float = DEFAULT_MARGIN, every: float = DEFAULT_EVERY) -> None:
        self._margin = margin
        self._every = every
        self._aws: dict[str | None, _Shared[AwsSource]] = {}
        self._google: dict[str | None, _Shared[GoogleSource]] = {}

    def credentials_for(self, dep: DeploymentConfig, wire: Wire) -> Credentials:
        """The deployment's credentials, by ``wire.auth``; not started (``start`` fetches)."""
        if wire.auth == "x-api-key":
            return StaticKey(dep, "x-api-key")
        if wire.auth == "bearer":
            return StaticKey(dep, "authorization", "Bearer ")
        if wire.auth == "sigv4":
            if wire.signing is None:
                raise ConfigError(f"deployment `{dep.name}`: a SigV4 wire without signing inputs")
            aws = self._aws.get(dep.aws_profile)
            if aws is None:
                from .aws import AwsSource

                source = AwsSource(dep.aws_profile, margin=self._margin, every=self._every)
                aws = self._aws[dep.aws_profile] = _Shared(source)
            aws.deployments.append(dep.name)
            return SigV4(aws, wire.signing.service, wire.signing.region)
        google = self._google.get(dep.google_key_file)
        if google is None:
            from .google import GoogleSource

            key_file = dep.google_key_file
            google = _Shared(GoogleSource(key_file, margin=self._margin, every=self._every))
            self._google[key_file] = google
        google.deployments.append(dep.name)
        return GoogleToken(google)

    def stats(self) -> list[RefreshStats]:
        """Every shared source's refresh counters, for metrics."""
        shared: list[_Shared[AwsSource] | _Shared[GoogleSource]] = [
            *self._aws.values(),
            *self._google.values(),
        ]
        return [s.source.stats() for s in shared]
