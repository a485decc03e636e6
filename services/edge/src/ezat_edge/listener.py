"""The edge's listening socket: its own, or one handed down by its supervisor so that the edge
can be replaced without refusing a connection (docs/reliability.md, "The edge's socket").

A supervisor (``ezat up``) that binds the edge's address itself passes the socket's descriptor in
``EZAT_EDGE_LISTEN_FD``. Every edge it starts accepts from that one socket, so connections that
arrive while an edge restarts wait in its accept queue instead of being refused, and a warm
replacement accepts beside the old edge until the old one closes its copy on SIGTERM.
"""

from __future__ import annotations

import logging
import socket

from aiohttp import web
from ezat_common import environment

log = logging.getLogger("ezat.edge.listener")

BACKLOG = 1024


def site(runner: web.BaseRunner, host: str, port: int) -> web.BaseSite:
    """The site to start: on the inherited socket when there is one, else bound here."""
    inherited = inherited_socket()
    if inherited is None:
        return web.TCPSite(runner, host, port, reuse_address=True, backlog=BACKLOG)
    bound = inherited.getsockname()
    if port and (bound[1] != port):
        log.warning("the inherited socket listens on %s, not on port %d as configured", bound, port)
    return web.SockSite(runner, inherited, backlog=BACKLOG)


def inherited_socket() -> socket.socket | None:
    value = environment.edge_listen_fd()
    if value is None:
        return None
    if not value.isdigit():
        raise SystemExit(f"{environment.EDGE_LISTEN_FD}={value!r} is not a file descriptor number")
    sock = socket.socket(fileno=int(value))
    if sock.type != socket.SOCK_STREAM:
        raise SystemExit(f"{environment.EDGE_LISTEN_FD}={value} is not a stream socket")
    sock.setblocking(False)
    return sock
