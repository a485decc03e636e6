"""The HTTP adapter: download one untrusted URL, connecting only to addresses that were checked.

For every hop (the URL and each redirect) the host is resolved here, every address it resolves
to must be public, and the connection then goes to exactly those addresses: aiohttp gets a
resolver that answers only with them, so a DNS answer that changes between the check and the
connect (DNS rebinding) cannot steer us elsewhere. The Host header and TLS SNI stay the hostname.
Redirects are followed by hand, the body is streamed and cut at the size limit, and the type is
decided from the bytes.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from .core import failures
from .core.addresses import Network, is_public, parse_address
from .core.media import ACCEPTED, accepted_type
from .core.urls import CheckedUrl, check_url, redirect_url

MAX_BYTES = 10 * 1024 * 1024
TIMEOUT_SECONDS = 15.0
MAX_REDIRECTS = 3
CHUNK_BYTES = 64 * 1024
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "EZAT-Fetcher/0.1"
_ACCEPT = {"image": "image/jpeg, image/png, image/gif, image/webp", "pdf": "application/pdf"}

# host, port -> the addresses it resolves to, as text. Injectable so tests can pin a name.
Resolve = Callable[[str, int], Awaitable[list[str]]]


async def system_resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class Downloaded:
    media_type: str
    data: bytes


class PinnedResolver(AbstractResolver):
    """aiohttp resolver that answers only for checked hosts, and only with the checked addresses.

    aiohttp skips the resolver for IP-literal hosts; those are checked the same way before the
    request, and the literal is the address connected to.
    """

    def __init__(self) -> None:
        self._pins: dict[str, list[ResolveResult]] = {}

    def pin(self, host: str, results: list[ResolveResult]) -> None:
        self._pins[host] = results

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        pinned = self._pins.get(host)
        if not pinned:
            # Never fall back to DNS: an unchecked name must not be connected to.
            raise OSError(f"no checked addresses for {host}")
        wanted = [r for r in pinned if family in (socket.AF_UNSPEC, r["family"])]
        return [{**r, "port": port} for r in wanted or pinned]

    async def close(self) -> None:
        self._pins.clear()


class Fetcher:
    """Downloads with the per-download limits of docs/api.md ("Images and PDFs"); raises
    ``failures.FetchFailure``."""

    def __init__(
        self,
        allow: Sequence[Network] = (),
        *,
        timeout: float = TIMEOUT_SECONDS,
        max_redirects: int = MAX_REDIRECTS,
        resolve: Resolve = system_resolve,
    ) -> None:
        self.allow = tuple(allow)
        self.timeout = timeout
        self.max_redirects = max_redirects
        self._resolve = resolve

    async def fetch(
        self, url: str, *, max_bytes: int = MAX_BYTES, kind: str = "image"
    ) -> Downloaded:
        if kind not in ACCEPTED:
            raise failures.unsupported_kind(kind)
        # The caller may lower the limit (its per-request budget), never raise it.
        limit = max(0, min(max_bytes, MAX_BYTES))
        resolver = PinnedResolver()
        connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None),  # the asyncio.timeout below covers it all
            trust_env=False,  # no proxy from the environment: we decide where to connect
            cookie_jar=aiohttp.DummyCookieJar(),
            headers={"User-Agent": USER_AGENT, "Accept": _ACCEPT[kind]},
        )
        try:
            async with asyncio.timeout(self.timeout):
                return await self._follow(session, resolver, url, limit, kind)
        except TimeoutError:
            raise failures.timed_out(self.timeout, kind) from None
        finally:
            await session.close()

    async def _follow(
        self,
        session: aiohttp.ClientSession,
        resolver: PinnedResolver,
        url: str,
        limit: int,
        kind: str,
    ) -> Downloaded:
        for _hop in range(self.max_redirects + 1):
            target = check_url(url, kind)
            request_url = _request_url(target, kind)
            resolver.pin(target.host, await self._checked(target, kind))
            try:
                async with session.get(request_url, allow_redirects=False) as resp:
                    location = resp.headers.get("Location")
                    if resp.status in REDIRECT_STATUSES and location:
                        url = redirect_url(str(resp.url), location)
                        continue
                    if not 200 <= resp.status < 300:
                        raise failures.http_status(resp.status, kind)
                    data = await read_body(resp, limit, kind)
            except aiohttp.ClientError as exc:
                raise _client_failure(exc, kind) from None
            media_type = accepted_type(data, kind)
            if media_type is None:
                raise failures.wrong_type(kind)
            return Downloaded(media_type=media_type, data=data)
        raise failures.too_many_redirects(kind)

    async def _checked(self, target: CheckedUrl, kind: str) -> list[ResolveResult]:
        """The host's addresses when every one of them is public; else a FetchFailure."""
        try:
            texts = await self._resolve(target.host, target.port)
        except OSError:  # socket.gaierror included
            raise failures.unresolved(kind) from None
        if not texts:
            raise failures.unresolved(kind)
        results: list[ResolveResult] = []
        for text in texts:
            address = parse_address(text)
            if address is None or not is_public(address, self.allow):
                raise failures.not_public(kind)
            family = socket.AF_INET if isinstance(address, IPv4Address) else socket.AF_INET6
            results.append(
                ResolveResult(
                    hostname=target.host,
                    host=str(address),
                    port=target.port,
                    family=family,
                    proto=socket.IPPROTO_TCP,
                    flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                )
            )
        return results


def _request_url(target: CheckedUrl, kind: str) -> URL:
    """The URL as aiohttp will use it, refused unless it names the host and port we check."""
    try:
        url = URL(target.url)
    except ValueError:
        raise failures.bad_url("the URL is not valid", kind) from None
    # Two parsers read the URL (ours and yarl's); refuse when they disagree about where it goes.
    same = (
        url.scheme == target.scheme
        and url.raw_host == target.host
        and url.port == target.port
        and url.user is None
        and url.password is None
    )
    if not same:
        raise failures.bad_url("the URL is not valid", kind)
    return url


async def read_body(resp: aiohttp.ClientResponse, limit: int, kind: str) -> bytes:
    """The body, streamed and refused as soon as it passes ``limit`` bytes."""
    declared = resp.content_length
    if declared is not None and declared > limit:
        raise failures.too_large(limit, kind)
    body = bytearray()
    async for chunk in resp.content.iter_chunked(CHUNK_BYTES):
        body += chunk
        if len(body) > limit:
            raise failures.too_large(limit, kind)
    return bytes(body)


def _client_failure(exc: aiohttp.ClientError, kind: str) -> failures.FetchFailure:
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return failures.bad_certificate(kind)
    if isinstance(exc, aiohttp.InvalidURL):
        return failures.bad_url("the URL is not valid", kind)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return failures.unreachable(kind)
    if isinstance(exc, aiohttp.ClientResponseError | aiohttp.ClientPayloadError):
        return failures.bad_response(kind)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return failures.bad_response(kind)
    return failures.unreachable(kind)
