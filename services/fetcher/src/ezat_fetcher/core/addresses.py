"""Is an IP address public? The fetcher connects only to addresses for which this says yes.

Everything not routable on the public internet is refused: loopback, private, link-local (which
holds the cloud metadata service 169.254.169.254), CGNAT, multicast, reserved, documentation and
benchmarking ranges, IPv6 unique-local and site-local. IPv6 forms that embed an IPv4 address
(mapped, compatible, NAT64, 6to4, Teredo) are judged by the IPv4 address inside, because that is
where the packets end up. Networks from ``[fetcher] allow_networks`` count as public (tests and
private deployments only).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from ipaddress import (
    IPv4Address,
    IPv4Network,
    IPv6Address,
    IPv6Network,
    ip_address,
    ip_network,
)

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

# IANA IPv4 special-purpose registry, minus the few entries that are globally reachable anycast.
_BLOCKED_V4 = tuple(
    IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network"; 0.0.0.0 reaches the local host on Linux
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, incl. cloud metadata 169.254.169.254
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, incl. broadcast 255.255.255.255
    )
)

# Only 2000::/3 is allocated global unicast; inside it these are not reachable hosts.
_GLOBAL_UNICAST_V6 = IPv6Network("2000::/3")
_BLOCKED_V6 = tuple(
    IPv6Network(n)
    for n in (
        "2001::/23",  # IETF protocol assignments (Teredo is judged before this)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
    )
)
_MAPPED = IPv6Network("::ffff:0:0/96")
_COMPATIBLE = IPv6Network("::/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = IPv6Network("2002::/16")
_TEREDO = IPv6Network("2001::/32")


def parse_networks(texts: Iterable[str]) -> tuple[Network, ...]:
    """Networks from configuration; ``ValueError`` names the first one that is not a network."""
    networks: list[Network] = []
    for text in texts:
        try:
            networks.append(ip_network(text.strip(), strict=False))
        except ValueError:
            raise ValueError(f"`{text}` is not an IP network") from None
    return tuple(networks)


def parse_address(text: str) -> Address | None:
    """An address as a resolver writes it (IPv6 zones like ``%eth0`` are kept), else None."""
    try:
        return ip_address(text)
    except ValueError:
        return None


def embedded_v4(address: IPv6Address) -> list[IPv4Address]:
    """The IPv4 addresses an IPv6 address carries traffic to; empty for a native address."""
    if address in _MAPPED or address in _COMPATIBLE or address in _NAT64:
        # The IPv4 address is the low 32 bits. :: and ::1 fall in ::/96 too and come out as
        # 0.0.0.0/8, which is refused.
        return [IPv4Address(int(address) & 0xFFFFFFFF)]
    if address in _SIX_TO_FOUR:
        return [IPv4Address((int(address) >> 80) & 0xFFFFFFFF)]
    if address in _TEREDO:
        # Teredo carries both the server and the (obfuscated) client address; both must be public.
        teredo = address.teredo
        return list(teredo) if teredo is not None else []
    return []


def is_public(address: Address, allow: Sequence[Network] = ()) -> bool:
    """True when the fetcher may connect to ``address``."""
    if isinstance(address, IPv6Address) and address.scope_id:
        return False  # a zone index means a link-scoped address
    if any(address in net for net in allow):
        return True
    if isinstance(address, IPv4Address):
        return not any(address in net for net in _BLOCKED_V4)
    inner = embedded_v4(address)
    if inner:
        return all(is_public(v4, allow) for v4 in inner)
    if address not in _GLOBAL_UNICAST_V6:
        return False
    return not any(address in net for net in _BLOCKED_V6)
