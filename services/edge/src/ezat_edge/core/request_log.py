"""The request log without the socket (docs/observability.md, "Request log"): what one entry
holds, which requests have one, the log line's fields, the stored row, and the parameters and
query of ``GET /admin/v1/requests``.

An entry holds identities, counts and the gateway's own words, never content: no body, no
header value but the request id, no secret (a key is its id).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from ezat_common.envelopes import ReplyError
from ezat_common.errors import invalid
from ezat_common.prices import Prices
from ezat_common.pricing import cost_micros
from msgspec import Struct

from .spend import time_param

# The API of each client endpoint (its route's path); a path under a client prefix that no
# route serves is "other". Operator and health endpoints have no entry.
APIS: dict[str, str] = {
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "count_tokens",
    "/openai/v1/chat/completions": "chat",
    "/openai/v1/responses": "responses",
    "/v1/models": "models",
    "/openai/v1/models": "models",
    "/api/usage": "usage",
}
STORED_RESPONSES = "/openai/v1/responses/"
CLIENT_PREFIXES = ("/v1/", "/openai/v1/")
# A client that left before its answer: nginx's "client closed request".
CLIENT_CLOSED = 499
# The most of an error message kept (the gateway's words, never a deployment's: relayed_reason).
REASON_CHARS = 300
LIMIT_DEFAULT = 100
LIMIT_MAX = 1000
PARAMETERS = ("request_id", "key", "team", "model", "status", "since", "limit")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_KEY = re.compile(r"key_[0-9a-f]{16}")
_TEAM = re.compile(r"team_[0-9a-f]{16}")
_STATUS_CLASS = re.compile(r"[1-5]xx")


def api_of(path: str) -> str | None:
    """The API a request's entry names; None: the request has none (health, metrics, admin)."""
    api = APIS.get(path)
    if api is not None:
        return api
    if path.startswith(STORED_RESPONSES):
        return "stored_responses"
    if path.startswith(CLIENT_PREFIXES):
        return "other"
    return None


class Counted(Struct, kw_only=True, tag_field="t", tag="usage"):
    """The fields of a usage record (``ezat_common.envelopes.UsageRecord``) an entry reads; the
    decoder skips the others (ids, times, attribution) undecoded: half the cost of the whole."""

    model: str
    stream: bool
    status: str
    deployment: str = ""
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    output_tokens: int = 0
    web_search_requests: int = 0
    web_fetch_requests: int = 0
    prices: Prices | None = None


decode_counted = msgspec.msgpack.Decoder(Counted).decode


class Entry(Struct, kw_only=True):
    """One request's entry, filled in as the request goes (middleware, auth, relay)."""

    at: float  # epoch seconds of its arrival
    started: float  # monotonic, of its arrival
    request_id: str
    api: str
    key_id: str = ""
    team_id: str | None = None
    model: str | None = None
    stream: bool = False
    status: int = 0
    upstream_status: int | None = None
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0
    error_type: str | None = None
    error_reason: str | None = None
    # Monotonic time of its first content event written (0.0: none; relay.py's).
    first_token: float = 0.0
    # The encoded usage record its final reply carried: decoded off the request's path, when
    # the entry is written (``resolve``).
    usage: bytes = b""

    def failed(self, err: ReplyError) -> None:
        """The error the client was given (the last one wins: a stream's error event)."""
        self.error_type = err.type
        self.error_reason = relayed_reason(err) if err.relayed else err.message[:REASON_CHARS]
        if err.upstream_status is not None:
            self.upstream_status = err.upstream_status

    def resolve(self) -> None:
        """Its usage record read into it, once (tokens, cost, model)."""
        if self.usage:
            usage, self.usage = self.usage, b""
            try:
                self.used(decode_counted(usage))
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass  # not a record this version reads: the entry has no counts

    def used(self, record: Counted) -> None:
        """What the request's usage record says (the final reply carried it)."""
        self.model = record.model
        self.stream = record.stream
        self.input_tokens = (
            record.input_tokens
            + record.cache_read_tokens
            + record.cache_write_5m_tokens
            + record.cache_write_1h_tokens
        )
        self.output_tokens = record.output_tokens
        if record.prices is not None:
            self.cost_micros = cost_micros(record, record.prices)
        if record.status == "complete" and record.deployment and self.upstream_status is None:
            self.upstream_status = 200

    def ended(self, status: int, now: float) -> None:
        """Its answer's status, and its times, ``now`` that it is answered (monotonic)."""
        self.status = status
        self.latency_ms = round((now - self.started) * 1000, 3)
        if self.first_token:
            self.ttft_ms = round((self.first_token - self.started) * 1000, 3)
        if status >= 400 and self.error_type is None:
            self.error_type = "client_closed" if status == CLIENT_CLOSED else "error"


class AnonymousSampler:
    """Which entries without a key (``key_id == ""``: a missing or unknown key, a request refused
    before its key was read) are stored: at most ``per_second`` in each second of the clock, so
    that clients without a valid key cannot flood the table; entries with a key always are."""

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self._second = -1
        self._kept = 0
        self.skipped = 0  # since last read (``take_skipped``)

    def keep(self, key_id: str, now: float) -> bool:
        if key_id:
            return True
        second = int(now)
        if second != self._second:
            self._second, self._kept = second, 0
        if self._kept >= self.per_second:
            self.skipped += 1
            return False
        self._kept += 1
        return True

    def take_skipped(self) -> int:
        skipped, self.skipped = self.skipped, 0
        return skipped


def relayed_reason(err: ReplyError) -> str:
    """The gateway's words for an error whose message the deployment wrote (a 4xx it answered,
    an error event of its stream): its type and status, never its text, which may quote the
    request's content."""
    if err.upstream_status is not None:
        return f"the deployment rejected the request (HTTP {err.upstream_status}, {err.type})"
    return f"the deployment's answer ended with an error event ({err.type}, HTTP {err.status})"


class Line(Struct):
    """The log line's fields after its ``ts``, ``level``, ``service`` and ``msg``, in their order
    (docs/observability.md): a Struct, so that a flush's lines are one ``encode_lines``."""

    request_id: str
    key_id: str
    team_id: str | None
    model: str | None
    api: str
    stream: bool
    status: int
    upstream_status: int | None
    latency_ms: float
    ttft_ms: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error_type: str | None
    error_reason: str | None


_encode_lines = msgspec.json.Encoder().encode_lines


# request_id, key_id, team_id, model, api, stream, status, upstream_status, latency_ms, ttft_ms,
# input_tokens, output_tokens: typed, so that mypy checks them against ``Line``'s fields.
Shared = tuple[
    str, str, str | None, str | None, str, bool, int, int | None, float, float | None, int, int
]


def _shared(e: Entry) -> Shared:
    """What the line and the row both hold, in both their orders: all but the time and cost."""
    return (
        e.request_id,
        e.key_id,
        e.team_id,
        e.model,
        e.api,
        e.stream,
        e.status,
        e.upstream_status,
        e.latency_ms,
        e.ttft_ms,
        e.input_tokens,
        e.output_tokens,
    )


def log_line(e: Entry) -> Line:
    return Line(*_shared(e), e.cost_micros / 1_000_000, e.error_type, e.error_reason)


def log_lines(entries: Sequence[Entry]) -> bytes:
    """The entries' log lines, one JSON object a line (``ezat_common.logs`` heads each)."""
    return _encode_lines([log_line(e) for e in entries])


# The stored row's columns, in the order of ``row``.
COLUMNS = (
    "at",
    "request_id",
    "key_id",
    "team_id",
    "model",
    "api",
    "stream",
    "status",
    "upstream_status",
    "latency_ms",
    "ttft_ms",
    "input_tokens",
    "output_tokens",
    "cost_micros",
    "error_type",
    "error_reason",
)


def row(e: Entry) -> tuple[Any, ...]:
    at = datetime.datetime.fromtimestamp(e.at, datetime.UTC)
    return (at, *_shared(e), e.cost_micros, e.error_type, e.error_reason)


class RequestsQuery(Struct, frozen=True, kw_only=True):
    request_id: str | None = None
    key: str | None = None
    team: str | None = None
    model: str | None = None
    status: int | None = None
    status_class: int | None = None  # 4 for "4xx"
    since: datetime.datetime | None = None
    limit: int = LIMIT_DEFAULT


def to_query(q: Mapping[str, str]) -> RequestsQuery:
    """The entries a request asks for; a 400 naming the first bad parameter."""
    for name in q:
        if name not in PARAMETERS:
            raise invalid(name[:64], f"is not a parameter; the parameters: {', '.join(PARAMETERS)}")
    return RequestsQuery(
        request_id=_matching(q, "request_id", _REQUEST_ID, "1-128 of [A-Za-z0-9._:-]"),
        key=_matching(q, "key", _KEY, "a key id (key_ and 16 hex digits)"),
        team=_matching(q, "team", _TEAM, "a team id (team_ and 16 hex digits)"),
        model=_model(q.get("model")),
        status=_status(q.get("status")),
        status_class=_status_class(q.get("status")),
        since=time_param("since", q.get("since")),
        limit=_limit(q.get("limit")),
    )


def _matching(q: Mapping[str, str], name: str, pattern: re.Pattern[str], what: str) -> str | None:
    value = q.get(name)
    if not value:
        return None
    if not pattern.fullmatch(value):
        raise invalid(name, f"must be {what}")
    return value


def _model(value: str | None) -> str | None:
    if not value:
        return None
    if len(value) > 256:
        raise invalid("model", "is longer than 256 characters")
    return value


def _status(value: str | None) -> int | None:
    if not value or _STATUS_CLASS.fullmatch(value):
        return None
    if not (value.isascii() and value.isdigit() and len(value) == 3 and 100 <= int(value) <= 599):
        raise invalid("status", "must be an HTTP status (such as 429) or a class (such as 5xx)")
    return int(value)


def _status_class(value: str | None) -> int | None:
    return int(value[0]) if value and _STATUS_CLASS.fullmatch(value) else None


def _limit(value: str | None) -> int:
    if not value:
        return LIMIT_DEFAULT
    if not (value.isascii() and value.isdigit() and len(value) <= 6):
        raise invalid("limit", f"must be a whole number from 1 to {LIMIT_MAX}")
    limit = int(value)
    if not 1 <= limit <= LIMIT_MAX:
        raise invalid("limit", f"must be a whole number from 1 to {LIMIT_MAX}")
    return limit


def to_sql(q: RequestsQuery) -> tuple[str, list[Any]]:
    """The query of ``q``'s entries, newest first, one more than its limit (``has_more``)."""
    where: list[str] = []
    args: list[Any] = []
    for column, value in (
        ("request_id", q.request_id),
        ("key_id", q.key),
        ("team_id", q.team),
        ("model", q.model),
        ("status", q.status),
    ):
        if value is not None:
            args.append(value)
            where.append(f"{column} = ${len(args)}")
    if q.status_class is not None:
        args.append(q.status_class * 100)
        where.append(f"status >= ${len(args)} AND status < ${len(args)} + 100")
    if q.since is not None:
        args.append(q.since)
        where.append(f"at >= ${len(args)}")
    args.append(q.limit + 1)
    condition = f"WHERE {' AND '.join(where)} " if where else ""
    sql = (
        f"SELECT {', '.join(COLUMNS)} FROM request_log {condition}"
        f"ORDER BY at DESC, id DESC LIMIT ${len(args)}"
    )
    return sql, args


def to_page(rows: Sequence[Mapping[str, Any]], limit: int) -> dict[str, Any]:
    """The answer: ``{"data": [...], "has_more": bool}`` (common contract, docs/openapi.yaml)."""
    data = [_entry_json(r) for r in rows[:limit]]
    return {"data": data, "has_more": len(rows) > limit}


def _entry_json(r: Mapping[str, Any]) -> dict[str, Any]:
    at: datetime.datetime = r["at"]
    return {
        "at": at.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "request_id": r["request_id"],
        "key_id": r["key_id"],
        "team_id": r["team_id"],
        "model": r["model"],
        "api": r["api"],
        "stream": r["stream"],
        "status": r["status"],
        "upstream_status": r["upstream_status"],
        "latency_ms": r["latency_ms"],
        "ttft_ms": r["ttft_ms"],
        "input_tokens": r["input_tokens"],
        "output_tokens": r["output_tokens"],
        "cost_usd": r["cost_micros"] / 1_000_000,
        "error_type": r["error_type"],
        "error_reason": r["error_reason"],
    }
