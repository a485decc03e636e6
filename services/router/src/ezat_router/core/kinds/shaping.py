"""Per-request shaping, shared by every kind: a deployment's ``Wire`` (built once by its kind's
module, ``wires.wire``) and ``shape``, which turns one translator body into the request the
deployment receives (origin, path, headers, exact body bytes), without I/O. The package's
docstring (``kinds/__init__.py``) says what shaping may and may not touch.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple
from urllib.parse import urlsplit

import msgspec
from ezat_common.config import DeploymentConfig

from ..payload import PayloadError, upstream_model, with_model

Api = Literal["messages", "count_tokens"]
# How the adapter authenticates: the Anthropic API's key header, AWS SigV4 (service and region
# in ``SigV4Inputs``), a Bedrock API key as a bearer token, a Google OAuth 2 access token.
Auth = Literal["x-api-key", "sigv4", "bearer", "google"]

# Client request headers that never go upstream, whatever the kind: the client's credentials
# for the gateway, the gateway's own headers, and what the router sets itself per kind.
NEVER_UPSTREAM = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "x-goog-api-key",
        "x-amz-security-token",
        "x-amz-date",
        "x-amz-content-sha256",
        "cookie",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "anthropic-version",
    }
)
NEVER_UPSTREAM_PREFIXES = ("x-ezat-", "x-amz-", "x-goog-")

# Top-level body fields the prefix writes: a copy in the body is removed, never sent twice.
OWNED_FIELDS = frozenset({"model", "stream", "anthropic_version", "anthropic_beta"})

_encode = msgspec.json.encode
_decode_top = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode


def never_upstream(header: str) -> bool:
    """Whether a client's request header must not reach any deployment."""
    name = header.lower()
    return name in NEVER_UPSTREAM or name.startswith(NEVER_UPSTREAM_PREFIXES)


@dataclass(frozen=True, slots=True)
class SigV4Inputs:
    """The non-secret parts of a SigV4 signature: botocore's ``SigV4Auth(credentials, service,
    region)`` takes these; the credentials come from the adapter's credential chain."""

    service: str
    region: str


@dataclass(frozen=True, slots=True)
class Route:
    """One (api, stream) of a deployment: the request path and the headers it adds."""

    path: str
    headers: dict[str, str]


class Shaped(NamedTuple):
    """One request as the deployment receives it (auth aside). ``dropped_betas`` and
    ``dropped_fields`` are what the kind refused; the caller logs each value once. A tuple, not
    a frozen dataclass: one is made per attempt, and a frozen dataclass costs a microsecond."""

    method: str
    url: str
    path: str
    headers: Mapping[str, str]  # the route's own, shared: never changed by a caller
    body: bytes
    dropped_betas: tuple[str, ...] = ()
    dropped_fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Wire:
    """A deployment's wire, built once: everything per-request shaping reads."""

    kind: str
    origin: str  # scheme://host[:port], no path
    auth: Auth
    signing: SigV4Inputs | None
    headers: dict[str, str]  # every request's kind headers (content type, version)
    routes: dict[tuple[Api, bool], Route]
    # The anthropic-beta values the kind accepts (None: every one) and whether they go in the
    # anthropic-beta header (else in the body's anthropic_beta array).
    allowed_betas: frozenset[str] | None
    betas_in_header: bool
    refused_fields: frozenset[str]
    # The body's start per (api, stream) for a request without betas: ``{"key":value`` with no
    # closing brace (``payload.with_model`` splices the translator's members after it).
    prefixes: dict[tuple[Api, bool], bytes]
    # Bedrock CountTokens: the shaped body is base64 inside {"input":{"invokeModel":...}}.
    wraps_count: bool = False
    # Fields the count_tokens prefix writes beyond OWNED_FIELDS (Bedrock's "max_tokens":1).
    count_owned: frozenset[str] = frozenset()
    # Whether a client's copy of a prefix-owned field can reach the body: not for the anthropic
    # kind, whose body is the translator's as the Anthropic API takes it (no model, no stream),
    # so its requests skip the byte search unless the deployment refuses fields.
    scans_owned: bool = True
    # Per api: the top-level names removed from the body, and the byte search that finds them;
    # per route: the kind's and the route's headers, merged once.
    removed: dict[Api, frozenset[str]] = field(init=False, repr=False)
    scans: dict[Api, re.Pattern[bytes]] = field(init=False, repr=False)
    route_headers: dict[tuple[Api, bool], dict[str, str]] = field(init=False, repr=False)
    urls: dict[tuple[Api, bool], str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        base = (OWNED_FIELDS if self.scans_owned else frozenset()) | self.refused_fields
        removed: dict[Api, frozenset[str]] = {
            "messages": base,
            "count_tokens": base | self.count_owned,
        }
        object.__setattr__(self, "removed", removed)
        object.__setattr__(self, "scans", {api: field_scan(n) for api, n in removed.items()})
        merged = {k: {**self.headers, **r.headers} for k, r in self.routes.items()}
        object.__setattr__(self, "route_headers", merged)
        object.__setattr__(self, "urls", {k: self.origin + r.path for k, r in self.routes.items()})

    def route(self, api: Api, stream: bool) -> Route:
        return self.routes[route_key(api, stream)]


def route_key(api: Api, stream: bool) -> tuple[Api, bool]:
    """A request's route: count_tokens never streams, whatever the request said."""
    return api, stream and api == "messages"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an http(s) URL: its path, query and userinfo left out."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port is not None else "")


def split_betas(header: str | None) -> tuple[str, ...]:
    """The values of an ``anthropic-beta`` header, in order, each once."""
    if not header:
        return ()
    seen: dict[str, None] = {}
    for value in header.split(","):
        value = value.strip()
        if value:
            seen[value] = None
    return tuple(seen)


def filter_betas(
    betas: tuple[str, ...], allowed: frozenset[str] | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(kept, dropped)``: the betas the kind accepts, and those it would refuse."""
    if allowed is None:
        return betas, ()
    return (
        tuple(b for b in betas if b in allowed),
        tuple(b for b in betas if b not in allowed),
    )


def field_scan(names: frozenset[str]) -> re.Pattern[bytes]:
    """One pass over the body finds any of ``names`` as a JSON key (or string): the cheap
    pre-check before the body's top level is decoded."""
    alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names))
    return re.compile(b'"(?:' + alternatives + b')"')


def without_fields(
    body: bytes, names: frozenset[str], scan: re.Pattern[bytes] | None = None
) -> tuple[bytes, tuple[str, ...]]:
    """``body`` without its top-level members named in ``names``, and the names removed.

    ``body`` itself is returned (not copied) unless it contains one; then its other members are
    kept byte for byte, joined compactly (the translator's bodies are compact already)."""
    if not names or (scan or field_scan(names)).search(body) is None:
        return body, ()
    try:
        members = _decode_top(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise PayloadError("the request body is not a JSON object") from None
    removed = tuple(k for k in members if k in names)
    if not removed:
        return body, ()
    kept = [_encode(k) + b":" + bytes(v) for k, v in members.items() if k not in names]
    return b"{" + b",".join(kept) + b"}", removed


def model_name(dep: DeploymentConfig) -> str:
    """The name the deployment knows the model by: ``model_id`` for bedrock/vertex, the
    ``upstream_model`` (or the id after its last "/") for anthropic."""
    if dep.kind != "anthropic" and dep.model_id:
        return dep.model_id
    return upstream_model(dep)


def shape(wire: Wire, api: Api, stream: bool, body: bytes, beta: str | None) -> Shaped:
    """The request to send for ``body`` (the translator's, without ``model``).

    ``beta`` (the client's anthropic-beta header) is passed on for messages only, never for
    count_tokens (docs/api.md, "Messages API"), filtered by the kind's allow-list."""
    key = route_key(api, stream)
    route = wire.routes[key]
    kept: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    if beta and api == "messages":
        kept, dropped = filter_betas(split_betas(beta), wire.allowed_betas)
    removed: tuple[str, ...] = ()
    if wire.removed[api]:
        body, removed = without_fields(body, wire.removed[api], wire.scans[api])
    headers: Mapping[str, str] = wire.route_headers[key]
    prefix = wire.prefixes[key]
    if kept and wire.betas_in_header:
        headers = {**headers, "anthropic-beta": ",".join(kept)}
    elif kept:
        prefix += b',"anthropic_beta":' + _encode(list(kept))
    payload = with_model(prefix, body)
    if wire.wraps_count and api == "count_tokens":
        payload = count_tokens_envelope(payload)
    refused = tuple(f for f in removed if f in wire.refused_fields) if removed else ()
    return Shaped("POST", wire.urls[key], route.path, headers, payload, dropped, refused)


def count_tokens_envelope(invoke_body: bytes) -> bytes:
    """Bedrock CountTokens' body: the InvokeModel body, base64, in ``input.invokeModel.body``
    (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CountTokens.html and
    API_runtime_InvokeModelTokensRequest.html: "Type: Base64-encoded binary data object")."""
    return b'{"input":{"invokeModel":{"body":"' + base64.b64encode(invoke_body) + b'"}}}'


def events_type(wire: Wire) -> str:
    """The content type of the deployment's streams: what its stream route asks for in
    ``Accept`` (Bedrock invoke: AWS event stream), else Server-Sent Events."""
    return wire.route("messages", True).headers.get("accept", "text/event-stream")
