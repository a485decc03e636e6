"""``free_port``: each port it hands out is one it has not handed out lately, although the kernel
may give a port just released to the next bind (it did, ~1 in 1,000 picks of seven, here)."""

from __future__ import annotations

import socket

from ezat_cli.infra import free_port


def test_a_thousand_ports_in_a_row_are_all_different() -> None:
    ports = [free_port() for _ in range(1000)]
    assert len(set(ports)) == len(ports)


def test_a_port_handed_out_is_free_to_bind() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
