"""The edge's HTTP connections: deadlines, a connection cap, and transport errors in API format.

aiohttp has no deadline for a request head: its only connection timer is the keep-alive one,
started when the connection opens and after each response, and it closes the connection only
when it fires while the handler waits for the next head. Its default (3,630 s; ``AppRunner``'s
75 s) let a client that never finishes its headers hold a file descriptor for an hour, and a
flood of such sockets exhausted the process's file limit for everyone. Nor does aiohttp cap open
connections, and the plain-text 400 it answers a malformed head with (``handle_error``) quotes the
offending line, which is logged too: a key line ending in a bare LF ended up in the log and in
the response body.

``EdgeProtocol`` is aiohttp's own ``RequestHandler`` with three additions, kept in the places
where aiohttp itself decides the same things:

* ``connection_made``: beyond ``max_connections`` open connections, a new one is answered 503
  (overloaded) and closed without a reset (``refusal.py``), so existing connections keep
  working. Otherwise one timer is armed: the first head must be complete within
  ``header_timeout`` of the connection opening.
* ``data_received``: the parser (aiohttp's C parser) counts the heads it completes in
  ``_request_count``. When bytes arrive while the handler waits for a head and no head
  completed, the same timer is armed for a kept-alive connection's next request; when a head
  completes it is cancelled. No task and no per-request timer for a head that arrives whole (the
  usual case): the check is two integer comparisons. When the timer fires before the head is
  complete, the client gets a 408 in the API's format (none if it sent nothing) and the
  connection is closed.
* ``handle_error``: aiohttp's hook for heads it could not parse (``BadHttpMessage`` and its
  kind, raised before any handler runs) and for exceptions that escape the handler. The answer
  is the API's error format (OpenAI's when the request line names an ``/openai/`` path) with a
  fresh request id; it names at most a header the gateway knows, never a value, and the log line
  has the exception's class only.

Idle kept-alive connections close after ``keepalive_timeout`` through aiohttp's own keep-alive
timer (a handler argument). Bodies have their deadline where they are read (``bodies.py``).

These overrides use a few attributes that aiohttp's ``RequestHandler`` keeps for itself
(``_request_count``, ``_waiter``, ``_messages``, ``_loop``, ``_manager``); uv.lock pins aiohttp and
``tests/edge/test_hostile_clients.py`` fails if any of them changes meaning.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import http_exceptions, web
from aiohttp.web_protocol import RequestHandler, _ErrInfo
from ezat_common import errors
from ezat_common.envelopes import ReplyError

from . import metrics as m
from .core.routes import api_format
from .ids import new_uuid4
from .refusal import refuse
from .responses import Format, error_response

log = logging.getLogger("ezat.edge.http")

RID = web.RequestKey("rid", str)
SERVER = "ezat"  # the Server header of every response: no Python or aiohttp version banner
FD_RESERVE = 64  # file descriptors kept for NATS, PostgreSQL, Redis, logs when capping connections

# Header names a transport error may name (never a value): only names the gateway reads, so that
# nothing a client wrote in a name's place (a key, say) is echoed back.
KNOWN_HEADERS = frozenset(
    {
        "x-api-key",
        "authorization",
        "x-ezat-session",
        "x-ezat-cache",
        "anthropic-beta",
        "anthropic-version",
        "x-request-id",
        "content-type",
        "content-length",
        "transfer-encoding",
        "host",
        "accept",
        "user-agent",
        "connection",
    }
)
_NAME_IN_ERROR = re.compile(r"b['\"]([!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}):")
_REASON = re.compile(r"[A-Za-z][A-Za-z -]{2,80}")
_REQUEST_TARGET = re.compile(rb"^[A-Z]{3,10} (\S*)")


@dataclass(slots=True)
class ConnectionGuard:
    """Limits shared by the connections of one edge."""

    max_connections: int
    header_timeout: float
    open: int = 0


def raw_error(
    fmt: Format,
    status: int,
    reason: str,
    type: str,
    message: str,
    retry_after: float | None = None,
) -> bytes:
    """A whole HTTP/1.1 error response, for the moments no aiohttp response exists yet."""
    rid = new_uuid4()
    code = "request_timeout" if status == 408 else None
    reply = ReplyError(
        status=status, type=type, message=message, code=code, retry_after=retry_after
    )
    renderer = errors.RENDERERS[fmt]
    body = renderer.body(reply, rid)
    status = renderer.status(reply)
    own = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "connection": "close",
        "server": SERVER,
        "request-id": rid,
        "x-request-id": rid,
    }
    headers = errors.http_headers(reply, own)
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    raw: bytes = head.encode() + b"\r\n" + body
    return raw


def format_of_head(head: bytes) -> Format:
    """The API of a head aiohttp could not parse, from its request line's target."""
    line = _REQUEST_TARGET.match(head)
    return api_format(line.group(1).decode("latin-1")) if line else "anthropic"


def describe(exc: BaseException | None) -> str:
    """What was wrong with a request aiohttp could not parse, without quoting any of it."""
    text = getattr(exc, "message", "") or ""
    name = None
    found = _NAME_IN_ERROR.search(text)
    if found and found.group(1).lower() in KNOWN_HEADERS:
        name = found.group(1).lower()
    # llhttp's reason is a fixed phrase ("Invalid character in chunk size"); the rest of the
    # message quotes the request, so only a first line made of words is kept.
    first = text.split(":\n", 1)[0].strip()
    reason = first if _REASON.fullmatch(first) else ""
    said = f" ({reason})" if reason else ""
    if isinstance(exc, http_exceptions.PayloadEncodingError) or any(
        w in reason.lower() for w in ("chunk", "content-length", "transfer-encoding")
    ):
        return f"request body: its framing (content-length or chunked encoding) is invalid{said}"
    if isinstance(exc, http_exceptions.LineTooLong):
        what = f"{name}: header" if name else "the request line or a header"
        return f"{what} is too long"
    if isinstance(exc, http_exceptions.BadHttpMethod):
        return "the request is not HTTP/1.1 (or it is TLS sent to a plain-HTTP port)"
    if isinstance(exc, http_exceptions.BadStatusLine):
        return f"the request line is malformed{said}"
    where = f"{name}: header" if name else "a request header"
    return (
        f"{where} is malformed{said}: each header line must end with CRLF and hold no control"
        " characters (CR, LF or NUL inside a value)"
    )


class EdgeProtocol(RequestHandler):
    __slots__ = ("_counted", "_error_head", "_guard", "_head_start", "_head_timer", "_heads_seen")

    def __init__(self, manager: web.Server, *, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._guard = guard
        self._head_timer: asyncio.TimerHandle | None = None
        self._heads_seen = 0
        self._head_start = b""  # the first bytes of a head still incomplete (its request line)
        self._error_head = b""  # the same, of the head that failed to parse
        self._counted = False

    # ---- the connection cap ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        if guard.open >= guard.max_connections:
            # Refused before aiohttp sees it: nothing to unregister later.
            self._manager = None
            m.CONNECTIONS_REFUSED.inc()
            refuse(
                cast(asyncio.Transport, transport),  # uvloop's is not a subclass
                raw_error(
                    "anthropic",
                    503,
                    "Service Unavailable",
                    "overloaded_error",
                    "the gateway has too many open connections; retry shortly",
                    retry_after=1,
                ),
            )
            return
        guard.open += 1
        self._counted = True
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._counted:
            self._counted = False
            self._guard.open -= 1
        self._disarm()
        super().connection_lost(exc)

    # ---- the head deadline ----------------------------------------------------------------

    def _arm(self) -> None:
        self._heads_seen = self._request_count
        self._head_timer = self._loop.call_later(self._guard.header_timeout, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._head_start = b""

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._request_count != self._heads_seen:
            # One or more heads completed (or failed to parse) in these bytes.
            self._heads_seen = self._request_count
            if self._messages and isinstance(self._messages[-1][0], _ErrInfo):
                self._error_head = self._head_start or bytes(data[:64])
            self._disarm()
        elif self._head_timer is not None:
            if not self._head_start:
                self._head_start = bytes(data[:64])
        elif self._waiter is not None and not self._waiter.done() and data:
            # The next request on a kept-alive connection has begun and is not complete yet.
            self._arm()
            self._head_start = bytes(data[:64])

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport is None or self._request_count != self._heads_seen:
            return
        if self._waiter is None or self._waiter.done():
            return  # a head was parsed and is being handled
        m.HEAD_TIMEOUTS.inc()
        if self._head_start:
            timeout = self._guard.header_timeout
            self.transport.write(
                raw_error(
                    format_of_head(self._head_start),
                    408,
                    "Request Timeout",
                    "invalid_request_error",
                    f"request headers: not complete within {timeout:g} s; send the whole"
                    " request head at once",
                )
            )
        self.force_close()

    # ---- transport errors -----------------------------------------------------------------

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:
            # As aiohttp: the response has begun, nothing else can be sent.
            raise ConnectionError("response already started")
        if isinstance(exc, http_exceptions.HttpProcessingError):
            # Never the exception's text: it quotes the request's bytes (a key, say).
            log.info("malformed request refused: %s", type(exc).__name__)
            m.MALFORMED.inc()
            fmt = format_of_head(self._error_head)
            self._error_head = b""
            text = describe(exc)
            status = status if 400 <= status < 500 else 400
        else:
            fmt = "openai" if request.path.startswith("/openai/") else "anthropic"
            if exc is not None:
                log.error("request failed outside its handler: %s", type(exc).__name__)
            text = "the model took too long to answer" if status == 504 else "internal error; retry"
        rid = request.get(RID) or new_uuid4()
        err = errors.type_for_status(status)
        resp = error_response(fmt, rid, status, err, text)
        resp.headers["request-id"] = rid
        resp.headers["x-request-id"] = rid
        resp.headers["server"] = SERVER
        resp.force_close()
        return resp


class EdgeServer(web.Server):
    """aiohttp's low-level server, making ``EdgeProtocol`` connections."""

    def __init__(self, *args: Any, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard

    def __call__(self) -> EdgeProtocol:
        return EdgeProtocol(self, loop=self._loop, guard=self.guard, **self._kwargs)


class EdgeRunner(web.AppRunner):
    """``AppRunner`` whose server is an ``EdgeServer`` (the rest as aiohttp makes it)."""

    def __init__(self, app: web.Application, *, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.guard = guard

    async def _make_server(self) -> web.Server:
        base = await super()._make_server()  # the app's start-up, and aiohttp's handler args
        return EdgeServer(
            base.request_handler,
            request_factory=base.request_factory,
            handler_cancellation=base.handler_cancellation,
            loop=base._loop,
            guard=self.guard,
            **base._kwargs,
        )


# While draining, how long idle kept-alive connections are left for their clients to close: longer
# than the SDKs' pool expiry (httpx: 5 s), so no client sends a request on one as it is closed.
IDLE_GRACE = 6.0


async def close_gently(runner: web.BaseRunner, grace: float = IDLE_GRACE) -> None:
    """Drain without a reset: stop accepting, answer every request from now on (in flight or
    arriving on a kept-alive connection) with ``connection: close``, and wait up to ``grace``
    for the clients to close their idle connections (docs/reliability.md, "The edge's socket").

    Closing an idle kept-alive connection races a client that is sending on it at that moment:
    the client sees a reset and, with retries off, an error. Left alone, a client closes it
    itself once its pool expiry passes, or on the ``connection: close`` of its next answer."""
    for site in list(runner.sites):
        await site.stop()
    server = runner.server
    if server is None:
        return
    for conn in server.connections:
        factory = conn._request_factory
        if factory is not None:
            conn._request_factory = _closing(factory)
        request = conn._current_request
        if request is not None:  # its answer, if not begun, says connection: close
            request._message = request._message._replace(should_close=True)
    loop = asyncio.get_running_loop()
    until = loop.time() + grace
    while server.connections and loop.time() < until:
        await asyncio.sleep(0.05)


def _closing(factory: Any) -> Any:
    def make(message: Any, *args: Any) -> Any:
        return factory(message._replace(should_close=True), *args)

    return make


def connection_budget(wanted: int) -> int:
    """``wanted`` connections, or fewer when the file limit cannot hold them and a reserve.

    The soft limit is raised to the hard one first (what Go's runtime does for its servers)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
            except (ValueError, OSError):
                pass
    except ImportError:  # pragma: no cover - not POSIX
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FD_RESERVE))
