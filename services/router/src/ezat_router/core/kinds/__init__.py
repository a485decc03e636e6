"""Per-kind request shaping (docs/routing.md, "Deployment kinds"): for one deployment and one
request, where it goes upstream (origin, path, the kind's static headers) and the exact body
bytes, computed without I/O. One module per kind (``anthropic``, ``bedrock``, ``vertex``)
builds its ``Wire`` once per deployment (``wires.wire(dep)``); ``shaping.shape`` does the
per-request work. This file only re-exports those two modules' names.

The body the translator sends is a JSON object without ``model`` (and, by contract, without
``stream``: the prefix writes it where the kind wants it). Shaping never parses the body unless
a byte search finds one of the few top-level names it may have to remove: the fields the prefix
owns (``model``, ``stream``, ``anthropic_version``, ``anthropic_beta``: a client's own copy
would duplicate the key) and the fields the kind refuses. Then only the top level is decoded
(``msgspec.Raw``: the values are slices of the original bytes, kept byte for byte).

Auth is the adapter's: a ``Wire`` names the scheme (``auth``) and, for SigV4, the non-secret
signing inputs; no key, token or signature is computed here.
"""

from __future__ import annotations

from .shaping import (
    NEVER_UPSTREAM,
    NEVER_UPSTREAM_PREFIXES,
    OWNED_FIELDS,
    Api,
    Auth,
    Route,
    Shaped,
    SigV4Inputs,
    Wire,
    count_tokens_envelope,
    events_type,
    field_scan,
    filter_betas,
    model_name,
    never_upstream,
    origin_of,
    route_key,
    shape,
    split_betas,
    without_fields,
)
from .wires import wire

__all__ = [
    "NEVER_UPSTREAM",
    "NEVER_UPSTREAM_PREFIXES",
    "OWNED_FIELDS",
    "Api",
    "Auth",
    "Route",
    "Shaped",
    "SigV4Inputs",
    "Wire",
    "count_tokens_envelope",
    "events_type",
    "field_scan",
    "filter_betas",
    "model_name",
    "never_upstream",
    "origin_of",
    "route_key",
    "shape",
    "split_betas",
    "wire",
    "without_fields",
]
