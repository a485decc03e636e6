"""Which URLs the fetcher will request: http(s), a host, no credentials, a valid port.

Only the shape is judged here; whether the host is a public address is decided after resolving
it (``addresses.py``), for every hop of a redirect chain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv6Address
from urllib.parse import urljoin, urlsplit

from . import failures

MAX_URL_CHARS = 8192
_SCHEMES = {"http": 80, "https": 443}
# Control characters and backslashes: URL parsers disagree about them, so refuse, not guess.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f\\]")
_HOSTNAME = re.compile(r"^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_.])?$")
# A host made only of digits and dots must be a canonical dotted quad: legacy forms such as
# 2130706433 or 127.1 are read differently by different resolvers.
_NUMERIC = re.compile(r"^[0-9.]+$")
_QUAD = re.compile(r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$")


@dataclass(frozen=True)
class CheckedUrl:
    """A URL accepted for download, split into what the connection needs."""

    url: str
    scheme: str
    host: str  # lower-case; an IPv6 literal without brackets
    port: int


def check_url(url: str, kind: str = "image") -> CheckedUrl:
    """The URL's parts, or ``failures.FetchFailure`` saying what is wrong with it."""
    if len(url) > MAX_URL_CHARS:
        raise failures.bad_url("the URL is too long", kind)
    if _UNSAFE.search(url):
        raise failures.bad_url("the URL is not valid", kind)
    try:
        parts = urlsplit(url)
    except ValueError:
        raise failures.bad_url("the URL is not valid", kind) from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise failures.not_http(kind)
    if "@" in parts.netloc:
        raise failures.bad_url("URLs with a user name or password are not accepted", kind)
    if not parts.hostname:
        raise failures.bad_url("the URL has no host", kind)
    host = ascii_host(parts.hostname)
    if host is None:
        raise failures.bad_url("the URL's host is not valid", kind)
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port is not None and not 1 <= port <= 65535:
        raise failures.bad_url("the URL's port is not valid", kind)
    return CheckedUrl(url=url, scheme=scheme, host=host, port=port or _SCHEMES[scheme])


def ascii_host(host: str) -> str | None:
    """The host as it goes on the wire (IDNA for non-ASCII names), or None when it is not one."""
    if ":" in host:
        if "%" in host:  # a zone index (%eth0) names a local interface
            return None
        try:
            return str(IPv6Address(host))
        except ValueError:
            return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    host = host.lower()
    if not _HOSTNAME.match(host):
        return None
    if _NUMERIC.match(host) and not _QUAD.match(host):
        return None
    return host


def redirect_url(current: str, location: str) -> str:
    """Where a redirect's Location header points, resolved against the URL that sent it."""
    return urljoin(current, location.strip())
