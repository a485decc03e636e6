"""The Anthropic Messages API as the gateway sees it (docs/api.md, "Messages API").

The gateway checks ``model``, ``max_tokens``, ``messages`` and ``stream``, and ``metadata`` within
the Anthropic API's own limits; everything else passes to the deployment unchanged. Two rewrites:
``cache_control`` is removed for models without prompt caching, and ``model`` is taken out of the
body (the router splices in the deployment's name).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from typing import Any

import msgspec
from ezat_common.bodies import TOO_DEEP, decode_object
from ezat_common.catalogue import Catalogue
from ezat_common.config import ModelConfig
from ezat_common.envelopes import Api
from ezat_common.errors import GatewayError, invalid
from msgspec import Struct

from .token_estimate import input_estimate
from .turns import ImageUrlPart

_encode_json = msgspec.json.Encoder().encode


class Prepared(Struct, kw_only=True, frozen=True):
    """What the router needs: the canonical model, the body without ``model``, and the mode.

    When the request has image blocks with a ``url`` source, ``body`` is empty and ``data`` is
    the rewritten request: the caller downloads ``image_urls`` into it, then encodes it.
    """

    model: ModelConfig
    response_model: str
    stream: bool
    body: bytes
    prefix_hash: str | None = None
    cache_ttl: str | None = None
    data: dict[str, Any] | None = None
    image_urls: list[ImageUrlPart] = []
    # count_tokens: the local estimate the router answers when no deployment can count.
    input_estimate: int | None = None
    # ``metadata.user_id`` of the request, for its usage record's attribution.
    user_id: str | None = None


def prefix_hash(model_id: str, data: dict[str, Any]) -> str:
    """Stable-prefix affinity key: the same model, system prompt and tools hash the same."""
    digest = hashlib.blake2b(model_id.encode(), digest_size=12)
    digest.update(_encode_json(data.get("system")))
    digest.update(_encode_json(data.get("tools")))
    return digest.hexdigest()


def largest_cache_ttl(node: Any) -> str | None:
    """ "1h" if any breakpoint asks for an hour, "5m" if any breakpoint exists, else None."""
    found: str | None = None
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            marker = item.get("cache_control")
            if isinstance(marker, dict):
                if marker.get("ttl") == "1h":
                    return "1h"
                found = "5m"
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))
    return found


def resolve_model(
    data: dict[str, Any],
    catalogue: Catalogue,
    allowed: Collection[str] | None = None,
    api: Api = "messages",
) -> tuple[ModelConfig, str]:
    """The model the body names; ``allowed``: the canonical ids the key may use (None: all),
    any other being the unknown model's 404 (docs/tenancy.md), which names ``api``'s model
    list."""
    if "model" not in data:
        raise invalid("model", "Field required")
    name = data["model"]
    if not isinstance(name, str):
        raise invalid("model", "must be a string such as `anthropic/claude-sonnet-5-5`")
    return catalogue.resolve_or_404(name, allowed, api=api), name


def _check_messages(data: dict[str, Any]) -> None:
    if "messages" not in data:
        raise invalid("messages", "Field required")
    messages = data["messages"]
    if not isinstance(messages, list):
        raise invalid("messages", "must be an array of messages")
    if not messages:
        raise invalid("messages", "must contain at least one message")


def _check_max_tokens(data: dict[str, Any]) -> None:
    if "max_tokens" not in data:
        raise invalid("max_tokens", "Field required")
    value = data["max_tokens"]
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid("max_tokens", "must be an integer")
    if value < 1:
        raise invalid("max_tokens", "must be at least 1")


# The Anthropic API's ``metadata``: only ``user_id``, a string of at most 256 characters (or null);
# another key is its 400 too. Checked here because the gateway keeps ``user_id`` (the usage row's
# attribution), so its size is the gateway's to bound, not only the deployment's.
METADATA_KEYS = frozenset({"user_id"})
USER_ID_CHARS = 256


def _check_metadata(data: dict[str, Any]) -> None:
    metadata = data.get("metadata")
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise invalid("metadata", 'must be an object such as {"user_id": "..."}')
    for key in metadata:
        if key not in METADATA_KEYS:
            raise invalid(f"metadata.{key[:64]}", "Extra inputs are not permitted; only user_id is")
    user_id = metadata.get("user_id")
    if user_id is None:
        return
    if not isinstance(user_id, str):
        raise invalid("metadata.user_id", "must be a string")
    if len(user_id) > USER_ID_CHARS:
        raise invalid(
            "metadata.user_id",
            f"is longer than {USER_ID_CHARS} characters ({len(user_id)}); send an opaque id "
            "such as a hash",
        )


def _check_stream(data: dict[str, Any]) -> bool:
    value = data.get("stream", False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid("stream", "must be a boolean")
    return value


def strip_cache_control(node: Any) -> Any:
    """Remove every ``cache_control`` key, at any depth, in place (iteratively: the depth of a
    client's JSON must not be the depth of our stack)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            item.pop("cache_control", None)
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))
    return node


def _url_source(block: Any) -> str | None:
    """The URL of an image block whose source is ``{"type": "url"}``, else None."""
    if not isinstance(block, dict) or block.get("type") != "image":
        return None
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "url":
        return None
    url = source.get("url")
    return url if isinstance(url, str) else None  # anything else: the deployment validates it


def image_url_parts(data: dict[str, Any]) -> list[ImageUrlPart]:
    """Image blocks with a URL source (docs/api.md, "Messages API"), in messages and inside
    ``tool_result`` blocks; the fetcher downloads them and they are sent inline."""
    parts: list[ImageUrlPart] = []
    messages = data.get("messages")
    if not isinstance(messages, list):
        return parts
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            url = _url_source(block)
            if url is not None:
                path = f"messages[{i}].content[{j}].source.url"
                parts.append(ImageUrlPart(path, url, i, j))
                continue
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if not isinstance(inner, list):
                continue
            for k, item in enumerate(inner):
                url = _url_source(item)
                if url is not None:
                    path = f"messages[{i}].content[{j}].content[{k}].source.url"
                    parts.append(ImageUrlPart(path, url, i, j, k))
    return parts


def _rewrite(data: dict[str, Any], model: ModelConfig) -> dict[str, Any]:
    # The router writes both where the deployment's kind wants them (RouteRequest.stream
    # carries the choice): Bedrock's invoke body may hold neither (docs/routing.md).
    del data["model"]
    data.pop("stream", None)
    if not model.prompt_caching:
        for key in ("system", "tools", "messages"):
            if key in data:
                strip_cache_control(data[key])
        data.pop("cache_control", None)
    return data


def encode_body(data: dict[str, Any]) -> bytes:
    try:
        return _encode_json(data)
    except RecursionError:
        raise GatewayError(400, TOO_DEEP) from None


def _checked(
    body: bytes,
    catalogue: Catalogue,
    *,
    max_tokens: bool,
    in_pieces: bool,
    allowed: Collection[str] | None,
) -> tuple[dict[str, Any], ModelConfig, str]:
    """What both endpoints do first: decode the object (``in_pieces``: its messages one at a
    time, pieces.py), resolve its model, check ``max_tokens`` (only where it is read) and
    ``messages``; the first failing step is the error reported."""
    if in_pieces:
        # Imported here: pieces.py reads the OpenAI paths' error wording, whose module imports
        # this one.
        from . import pieces

        data = pieces.decode_object(body, "messages")
    else:
        data = decode_object(body)
    api: Api = "messages" if max_tokens else "count_tokens"  # only create reads max_tokens
    model, name = resolve_model(data, catalogue, allowed, api)
    if max_tokens:
        _check_max_tokens(data)
    _check_messages(data)
    return data, model, name


def prepare_create(
    body: bytes,
    catalogue: Catalogue,
    *,
    in_pieces: bool = False,
    allowed: Collection[str] | None = None,
) -> Prepared:
    """``POST /v1/messages``: validate the four checked fields and prepare the upstream body."""
    data, model, name = _checked(
        body, catalogue, max_tokens=True, in_pieces=in_pieces, allowed=allowed
    )
    stream = _check_stream(data)
    _check_metadata(data)
    affinity = _prefix_hash(model.id, data)
    # Most requests carry no breakpoint: a byte search spares them the walk of every block.
    ttl = largest_cache_ttl(data) if model.prompt_caching and b"cache_control" in body else None
    rewritten = _rewrite(data, model)
    urls = image_url_parts(rewritten)
    return Prepared(
        model=model,
        response_model=name,
        stream=stream,
        body=b"" if urls else encode_body(rewritten),
        prefix_hash=affinity,
        cache_ttl=ttl,
        data=rewritten if urls else None,
        image_urls=urls,
        user_id=_user_id(data),
    )


def _user_id(data: dict[str, Any]) -> str | None:
    """The user a row is attributed to, from ``metadata.user_id`` (docs/billing.md,
    "Attribution"). Claude Code sends a JSON object there (``{"device_id", "account_uuid",
    "session_id"}``), not a user name: its non-empty ``account_uuid`` is the user, else none (the
    key's user stays), so that spend by user does not split into one user per machine and
    session."""
    metadata = data.get("metadata")  # checked by _check_metadata: an object or None
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user, str) or not user:
        return None
    if user.startswith("{"):
        try:
            envelope = msgspec.json.decode(user)
        except msgspec.DecodeError:
            return user
        if isinstance(envelope, dict) and "device_id" in envelope:
            account = envelope.get("account_uuid")
            return account if isinstance(account, str) and account else None
    return user


def _prefix_hash(model_id: str, data: dict[str, Any]) -> str:
    try:
        return prefix_hash(model_id, data)
    except RecursionError:
        raise GatewayError(400, TOO_DEEP) from None


def prepare_count(
    body: bytes,
    catalogue: Catalogue,
    *,
    in_pieces: bool = False,
    allowed: Collection[str] | None = None,
) -> Prepared:
    """``POST /v1/messages/count_tokens``: ``max_tokens`` and ``stream`` are ignored."""
    data, model, name = _checked(
        body, catalogue, max_tokens=False, in_pieces=in_pieces, allowed=allowed
    )
    data.pop("max_tokens", None)
    estimate = input_estimate(data)
    body = encode_body(_rewrite(data, model))
    return Prepared(
        model=model, response_model=name, stream=False, body=body, input_estimate=estimate
    )
