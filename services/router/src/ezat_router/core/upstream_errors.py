"""What an upstream failure means for the client and for the deployment.

Every failure becomes a ``AttemptFailure``: the ``ReplyError`` the client gets if it is the last
word, whether another deployment may be tried (only ever before the first byte reached the client),
and what it says about the deployment: a 429 rests it (``rate_limited``, for ``cooldown`` seconds
when it said how long), a fault (5xx, 529, unreachable, too slow, broken stream) counts towards its
circuit breaker (``fault``), a 4xx says nothing about it. Client messages name the model, never a
host, URL or stack trace.

Failover rules: connect errors, timeouts before the response headers, 429, 5xx and 529 try the
next deployment. 401/403 also do (they mean the *deployment's* credentials are wrong, which the
client can do nothing about). Every other 4xx is the request's fault and is relayed at once.
"""

from __future__ import annotations

import math
from typing import Literal

import msgspec
from ezat_common.envelopes import ReplyError
from ezat_common.errors import STATUS_OF_TYPE, retry_after_seconds, type_for_status
from ezat_common.schemas.anthropic import ErrorInfo, decode_error_body

from .health import FAULT_COOLDOWN

TransportKind = Literal["connect", "timeout", "stalled", "dropped", "protocol"]

DROPPED_MESSAGE = "the deployment stopped mid-response; the request was not charged"


class AttemptFailure(msgspec.Struct, frozen=True, kw_only=True):
    error: ReplyError
    retryable: bool
    # A 429: the deployment rests this long (its retry-after), or the configured default when
    # ``rate_limited`` and this is None.
    cooldown: float | None = None
    rate_limited: bool = False
    # A fault of the deployment (5xx, 529, timeout, connect, broken stream): feeds its breaker.
    fault: bool = False
    # Metric label: "429", "5xx", "529", "4xx", "connect", "timeout", "dropped", ...
    reason: str


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``retry-after`` header; None when absent or an HTTP date (not worth it)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def from_status(
    status: int, body: bytes, retry_after: str | None, model: str, *, cooldown_default: float
) -> AttemptFailure:
    """An upstream response that is not 2xx. A 429 without retry-after rests the deployment for
    ``cooldown_default`` (``[router] cooldown_default_seconds``), and the client is told so."""
    failure = _from_status(status, body, retry_after, model, cooldown_default=cooldown_default)
    # The request log names the deployment's status behind the client's (docs/observability.md).
    error = msgspec.structs.replace(failure.error, upstream_status=status)
    return msgspec.structs.replace(failure, error=error)


def _from_status(
    status: int, body: bytes, retry_after: str | None, model: str, *, cooldown_default: float
) -> AttemptFailure:
    wait = parse_retry_after(retry_after)
    if status == 429:
        return AttemptFailure(
            error=rate_limited(model, wait if wait is not None else cooldown_default),
            retryable=True,
            cooldown=wait,
            rate_limited=True,
            reason="429",
        )
    if status in (503, 529):
        pause = wait if wait is not None else FAULT_COOLDOWN
        message = f"the deployments of `{model}` are overloaded; retry after {pause:g} seconds"
        return AttemptFailure(
            error=ReplyError(
                status=529, type="overloaded_error", message=message, retry_after=pause
            ),
            retryable=True,
            fault=True,
            reason="529",
        )
    if status >= 500:
        message = f"the deployment of `{model}` failed (HTTP {status}); retry"
        return AttemptFailure(
            error=ReplyError(status=status, type=type_for_status(status), message=message),
            retryable=True,
            fault=True,
            reason="5xx",
        )
    if status in (401, 403):
        message = (
            f"a deployment of `{model}` refused the gateway's credentials; "
            "an operator must fix its key"
        )
        return AttemptFailure(
            error=ReplyError(status=500, type="api_error", message=message),
            retryable=True,
            fault=True,
            reason="auth",
        )
    return AttemptFailure(error=client_error(status, body), retryable=False, reason="4xx")


def rate_limited(model: str, pause: float) -> ReplyError:
    """429: the deployments of ``model`` are rate limited for ``pause`` seconds."""
    return _rate_limited(model, pause, told=pause)


def _rate_limited(model: str, pause: float, *, told: float) -> ReplyError:
    return ReplyError(
        status=429,
        type="rate_limit_error",
        message=f"the deployments of `{model}` are rate limited; retry after {told:g} seconds",
        retry_after=pause,
    )


def all_down(model: str, wait: float, *, all_limited: bool) -> ReplyError:
    """Every deployment of ``model`` rests for at least ``wait`` seconds, so none is tried: 429
    when every one is rate limited, else 529. The message says the wait as the client's
    ``retry-after`` header will (``errors.retry_after_seconds``)."""
    told = retry_after_seconds(wait)
    if all_limited:
        return _rate_limited(model, wait, told=told)
    return ReplyError(
        status=529,
        type="overloaded_error",
        message=f"every deployment of `{model}` is unavailable; retry after {told} seconds",
        retry_after=wait,
    )


def client_error(status: int, body: bytes) -> ReplyError:
    """The upstream's own 4xx, relayed with its Anthropic error type and message (``relayed``:
    the request log keeps the gateway's words instead)."""
    info = _error_info(body)
    kind = info.type if info is not None and info.type in STATUS_OF_TYPE else None
    message = info.message if info is not None and info.message else ""
    return ReplyError(
        status=status,
        type=kind or type_for_status(status),
        message=message or f"the model rejected the request (HTTP {status})",
        relayed=bool(message),
    )


def _error_info(body: bytes) -> ErrorInfo | None:
    try:
        return decode_error_body(body).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def from_transport(kind: TransportKind, model: str, seconds: float) -> AttemptFailure:
    """No usable response: unreachable, too slow to start (``timeout``: nothing usable within
    ``seconds`` of the attempt's start), silent for ``seconds`` mid-response (``stalled``), cut
    off, or not speaking SSE/JSON (``protocol``: garbage, or a 2xx HTML page)."""
    if kind == "connect":
        error = ReplyError(
            status=529,
            type="overloaded_error",
            message=f"no deployment of `{model}` could be reached; retry shortly",
            retry_after=FAULT_COOLDOWN,
        )
    elif kind == "timeout":
        error = ReplyError(
            status=504,
            type="timeout_error",
            message=(
                f"no deployment of `{model}` started answering within "
                f"{seconds:g} seconds; retry shortly"
            ),
            retry_after=FAULT_COOLDOWN,
        )
    elif kind == "stalled":
        error = ReplyError(
            status=504,
            type="timeout_error",
            message=(
                f"the deployment of `{model}` sent nothing for {seconds:g} seconds "
                "mid-response; the request was not charged"
            ),
        )
    elif kind == "dropped":
        error = ReplyError(status=500, type="api_error", message=DROPPED_MESSAGE)
    else:
        error = ReplyError(
            status=500,
            type="api_error",
            message=f"a deployment of `{model}` sent a malformed response; retry",
        )
    return AttemptFailure(error=error, retryable=True, fault=True, reason=kind)


def from_stream_error(info: ErrorInfo, *, cooldown_default: float) -> AttemptFailure:
    """An ``event: error`` from the upstream stream, relayed with the status of its type.

    Retryable (when nothing was sent yet) for the types a healthy deployment would not send:
    rate limits, overload and server errors. A rate limit carries no retry-after, so the
    deployment rests for ``cooldown_default`` and the client is told the same.
    """
    status = STATUS_OF_TYPE.get(info.type, 500)
    kind = info.type if info.type in STATUS_OF_TYPE else "api_error"
    wait = cooldown_default if status == 429 else FAULT_COOLDOWN if status >= 500 else None
    error = ReplyError(
        status=status,
        type=kind,
        message=info.message or "the model failed while answering; retry",
        relayed=bool(info.message),
        # 429 and 529 always tell the client when to come back (docs/api.md, "Endpoints and
        # errors").
        retry_after=wait if status in (429, 529) else None,
    )
    if wait is None:
        return AttemptFailure(error=error, retryable=False, reason="4xx")
    if status == 429:
        return AttemptFailure(error=error, retryable=True, rate_limited=True, reason="429")
    reason = "529" if status == 529 else "5xx"
    return AttemptFailure(error=error, retryable=True, fault=True, reason=reason)
