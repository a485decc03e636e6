"""ezat-http1: the hand-written HTTP/1.1 client of the router (its calls to deployments) and of
the load generator (bench/loadgen.py); docs/performance.md says why it is not aiohttp's.

``protocol`` is the protocol without I/O (addresses, request heads, the response parser);
``pool`` / ``connection`` / ``response`` are the asyncio client on top of it.
"""

from .pool import LIMIT_PER_ORIGIN, Pool
from .protocol import (
    Origin,
    ProtocolError,
    ResponseParser,
    address,
    idle_seconds,
    post_head,
    request_head,
    request_prefix,
)
from .response import (
    HIGH_WATER,
    STREAM_END_GRACE,
    BadResponse,
    ConnectFailed,
    OnBody,
    Response,
    ServerDisconnected,
    UpstreamError,
)

__all__ = [
    "HIGH_WATER",
    "LIMIT_PER_ORIGIN",
    "STREAM_END_GRACE",
    "BadResponse",
    "ConnectFailed",
    "OnBody",
    "Origin",
    "Pool",
    "ProtocolError",
    "Response",
    "ResponseParser",
    "ServerDisconnected",
    "UpstreamError",
    "address",
    "idle_seconds",
    "post_head",
    "request_head",
    "request_prefix",
]
