"""The ``RouteRequest`` every API's request is routed with (app.py): what the client request
carries is copied in one place, so the APIs cannot drift apart."""

from __future__ import annotations

import msgspec
from ezat_common import envelopes


def route_request(
    req: envelopes.ClientRequest,
    *,
    model: str,
    response_model: str,
    stream: bool,
    reply_to: str,
    body: bytes,
    body_ref: str | None,
    session_key: str | None,
    prefix_hash: str | None,
    cache_ttl: str | None,
    input_estimate: int | None = None,
    user_id: str | None = None,
) -> envelopes.RouteRequest:
    return envelopes.RouteRequest(
        request_id=req.request_id,
        uid=req.uid,
        api=req.api,
        key_id=req.key_id,
        received_at=req.received_at,
        client_reply_to=req.reply_to,
        # anthropic-beta goes upstream on create only (not count_tokens; the OpenAI API has none).
        beta=req.beta if req.api == "messages" else None,
        model=model,
        response_model=response_model,
        stream=stream,
        reply_to=reply_to,
        body=body,
        body_ref=body_ref,
        session_key=session_key,
        prefix_hash=prefix_hash,
        cache_ttl=cache_ttl,
        input_estimate=input_estimate,
        attribution=_attributed(req.attribution, user_id),
    )


def _attributed(
    attribution: envelopes.Attribution | None, user_id: str | None
) -> envelopes.Attribution | None:
    """The edge's attribution, its user replaced by Anthropic's ``metadata.user_id`` when the
    request names one (docs/billing.md, "Attribution")."""
    if attribution is None or not user_id:
        return attribution
    return msgspec.structs.replace(attribution, user=user_id)
