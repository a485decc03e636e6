"""Which addresses the fetcher may connect to (core/addresses.py)."""

from __future__ import annotations

from ipaddress import IPv6Address, ip_address

import pytest
from ezat_fetcher.core.addresses import embedded_v4, is_public, parse_address, parse_networks

PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255",  # just below CGNAT
    "100.128.0.0",  # just above CGNAT
    "172.15.255.255",  # just below 172.16/12
    "172.32.0.0",  # just above 172.16/12
    "192.169.0.1",
    "198.17.255.255",  # just below benchmarking
    "198.20.0.0",  # just above benchmarking
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2a00:1450:4001:81b::200e",
    "::ffff:8.8.8.8",  # IPv4-mapped public
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "2002:808:808::1",  # 6to4 of 8.8.8.8
]

NOT_PUBLIC = [
    # IPv4
    "0.0.0.0",
    "0.1.2.3",
    "10.0.0.1",
    "10.255.255.255",
    "100.64.0.1",  # CGNAT
    "100.127.255.254",
    "127.0.0.1",
    "127.255.255.254",
    "169.254.169.254",  # cloud metadata
    "169.254.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.0.0.8",
    "192.0.2.10",  # TEST-NET-1
    "192.88.99.1",
    "192.168.1.1",
    "198.18.0.1",  # benchmarking
    "198.19.255.255",
    "198.51.100.7",  # TEST-NET-2
    "203.0.113.9",  # TEST-NET-3
    "224.0.0.1",  # multicast
    "239.255.255.250",
    "240.0.0.1",  # reserved
    "255.255.255.255",
    # IPv6
    "::",
    "::1",
    "fe80::1",  # link-local
    "febf:ffff::1",
    "fec0::1",  # site-local (deprecated)
    "fc00::1",  # unique local
    "fd12:3456:789a::1",
    "ff02::1",  # multicast
    "ff0e::1",
    "100::1",  # discard-only
    "2001:db8::1",  # documentation
    "3fff::1",  # documentation (RFC 9637)
    "2001:2::1",  # benchmarking
    "2001:10::1",  # ORCHID
    "4000::1",  # outside 2000::/3: unallocated
    "64:ff9b:1::1",  # local-use NAT64
    # IPv6 forms that embed a non-public IPv4 address
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",
    "::ffff:0.0.0.0",
    "::127.0.0.1",  # IPv4-compatible
    "::169.254.169.254",
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::7f00:1",
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
    "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    "2001:0:c000:201:0:0:3f57:fefd",  # Teredo, server 192.0.2.1, client 192.168.1.2
]


@pytest.mark.parametrize("text", PUBLIC)
def test_public_addresses_are_accepted(text: str) -> None:
    assert is_public(ip_address(text))


@pytest.mark.parametrize("text", NOT_PUBLIC)
def test_non_public_addresses_are_refused(text: str) -> None:
    assert not is_public(ip_address(text))


def test_teredo_with_public_server_and_client_is_accepted() -> None:
    # Server 65.54.227.120; the client bits encode 8.8.8.8 (obfuscated: each bit inverted).
    client = 0xFFFFFFFF ^ int(ip_address("8.8.8.8"))
    teredo = IPv6Address(f"2001:0:4136:e378:8000:63bf:{client >> 16:x}:{client & 0xFFFF:x}")
    assert [str(a) for a in embedded_v4(teredo)] == ["65.54.227.120", "8.8.8.8"]
    assert is_public(teredo)


def test_zone_index_is_refused_even_on_a_global_address() -> None:
    assert not is_public(ip_address("2606:4700:4700::1111%eth0"))


@pytest.mark.parametrize(
    ("text", "allow", "expected"),
    [
        ("127.0.0.1", ["127.0.0.0/8"], True),
        ("127.0.0.2", ["127.0.0.1/32"], False),
        ("::ffff:127.0.0.1", ["127.0.0.0/8"], True),  # judged by the IPv4 inside
        ("::1", ["127.0.0.0/8"], False),  # IPv6 loopback is not 127/8
        ("::1", ["::1/128"], True),
        ("10.1.2.3", ["10.0.0.0/8"], True),
        ("10.1.2.3", ["192.168.0.0/16"], False),
        ("169.254.169.254", ["10.0.0.0/8", "127.0.0.0/8"], False),
        ("fd00::5", ["fd00::/8"], True),
        ("2002:7f00:1::1", ["127.0.0.0/8"], True),
    ],
)
def test_allow_networks_count_as_public(text: str, allow: list[str], expected: bool) -> None:
    assert is_public(ip_address(text), parse_networks(allow)) is expected


def test_parse_networks_names_the_bad_entry() -> None:
    assert [str(n) for n in parse_networks([" 10.0.0.1/8 ", "::1"])] == ["10.0.0.0/8", "::1/128"]
    with pytest.raises(ValueError, match=r"^`example\.com` is not an IP network$"):
        parse_networks(["10.0.0.0/8", "example.com"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8.8.8.8", "8.8.8.8"), ("fe80::1%eth0", "fe80::1%eth0"), ("nope", None), ("", None)],
)
def test_parse_address(text: str, expected: str | None) -> None:
    address = parse_address(text)
    assert (str(address) if address is not None else None) == expected
